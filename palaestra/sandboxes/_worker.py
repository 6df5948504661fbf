"""The sandbox worker process: set up once, then serve each request on a ready runner.

``palaestra/sandboxes/local.py`` starts it as ``python -I -B -c LOADER`` and sends it, as its
first message, this file, the modules it imports and its configuration (the docker backend
does the same inside a container), so no path of the host shows in its command line. It
imports only the standard library. Process tree::

    worker (this file and _monitor.py: warm; own user + network namespace; reads the host's
    │       requests, hands each to a ready runner, enforces the deadline, reports)
    └─ spawner (_spawner.py: forked before any request; never reads one; forks, reaps and
       │        reports the runners)
       └─ runner (_runner.py: PID 1 of a new PID namespace; private mount, IPC and UTS
                  namespaces over a minimal read-only root with a tmpfs work dir; cgroup,
                  fresh keyring, Landlock, seccomp, no capabilities; all of it set up before
                  the request arrives, so a run is a hand-off to a ready process)

Kernel mechanisms live in ``_confine.py``; helpers shared by the processes in
``_plumbing.py``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import stat
import sys
import tempfile

import _confine as confine
from _monitor import Monitor, SpawnerLink
from _plumbing import read_message, remove_tree, write_message


def serve(monitor: Monitor, job: dict) -> None:
    """One run, or one session until it is closed, of the host's request ``job``."""
    if not monitor.ready:
        write_message(1, {"error": monitor.startup_error(), "id": job["id"]})
        return
    monitor.start(job)
    if not job["session"]:
        result = monitor.execute(None, job["timeout"])
        write_message(1, {**result, "id": job["id"]})
        return
    write_message(1, {"started": True, "id": job["id"]})
    while monitor.alive and (request := read_message(0)) is not None:
        if request.get("op") == "close":
            break
        result = monitor.execute(request["code"], request["timeout"])
        write_message(1, {**result, "id": request["id"]})


def prepare_mount(setup: dict) -> bool:
    """Build the worker's template root and check that a run can enter it (in a child)."""
    try:
        confine.build_template_root(setup["readable"])
    except OSError:
        return False
    pid = os.fork()
    if pid == 0:
        code = 1
        with contextlib.suppress(BaseException):
            confine.unshare(confine.CLONE_NEWPID)
            inner = os.fork()
            if inner == 0:
                with contextlib.suppress(BaseException):
                    confine.enter_root(1, 16)
                    os._exit(0)
                os._exit(1)
            code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def exit_notices_work() -> bool:
    """Whether this process can take a child's seccomp listener, hear its exit and let it
    go on exiting (a probe: old kernels, containers and ptrace policies refuse a step)."""
    (fd_r, fd_w), (go_r, go_w) = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(BaseException):
            program = confine.seccomp_filter(unix_sockets=True, metadata=True, exit_notices=True)
            listener = confine.apply_seccomp(program, listener=True)
            os.write(fd_w, str(listener).encode())
            os.read(go_r, 1)
            os.close(listener)
            os._exit(7)
        os._exit(1)
    for fd in (fd_w, go_r):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    opened, heard = [fd_r, go_w, pidfd], False
    try:
        opened.append(listener := confine.pidfd_getfd(pidfd, int(os.read(fd_r, 16))))
        os.write(go_w, b"x")
        if select.select([listener], [], [], 2.0)[0]:
            heard = confine.receive_notice(listener)[::2] == (pid, 7)
        select.select([pidfd], [], [], 2.0)  # let on, it exits (unless the kernel cannot)
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        exit_code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        for fd in opened:
            os.close(fd)
    return heard and exit_code == 7


def set_up(config: dict) -> tuple[dict, confine.Cgroups | None]:
    """Enter the worker's namespaces and find out what confines each run (or raise, leaving
    no cgroup behind)."""
    cgroups = None
    if config["cgroups"] is not False:
        cgroups = confine.Cgroups(f"palaestra-sandbox-{os.getpid()}")
    try:
        if config["cgroups"] and "memory" not in cgroups.dirs:
            raise OSError("no writable memory cgroup controller")
        return _set_up_mechanisms(config, cgroups), cgroups
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        raise


def _set_up_mechanisms(config: dict, cgroups: confine.Cgroups | None) -> dict:
    host_root = os.geteuid() == 0
    setup = {"namespaces": False, "mount": False, "landlock_abi": 0, "seccomp": False}
    setup["exit_notices"] = False
    setup.update(limits=config["limits"], readable=confine.readable_paths(config["readable"]))
    if config["namespaces"] is not False:
        try:
            confine.enter_user_namespace()
            setup["namespaces"] = True
        except OSError as exc:
            if config["namespaces"]:
                raise OSError(f"cannot create user/network namespaces: {exc}") from exc
    if setup["namespaces"] and config["mount"] is not False:
        setup["mount"] = prepare_mount(setup)
    if config["mount"] and not setup["mount"]:
        raise OSError("cannot build a private mount namespace here")
    if config["landlock"] is not False:
        setup["landlock_abi"] = confine.landlock_abi()
        if config["landlock"] and not setup["landlock_abi"]:
            raise OSError("Landlock is not available in this kernel")
    if config["seccomp"] is not False:
        setup["seccomp"] = confine.seccomp_supported() and "Seccomp:" in _status()
        if config["seccomp"] and not setup["seccomp"]:
            raise OSError("no seccomp filter for this kernel or architecture")
        # Exit notices: the worker learns a runner's exit status before the kernel tears the
        # runner down; with PID namespaces only (without, orphans are killed after the exit).
        setup["exit_notices"] = (
            setup["seccomp"]
            and setup["namespaces"]
            and cgroups is not None
            and "memory" in cgroups.dirs  # the memory verdict must not need the runner's rusage
            and exit_notices_work()
        )
        program = confine.seccomp_filter(
            unix_sockets=setup["mount"],
            metadata=setup["mount"],
            exit_notices=setup["exit_notices"],
        )
        setup["seccomp_program"] = program if setup["seccomp"] else None
    filesystem = setup["mount"] or setup["landlock_abi"]
    if host_root and not filesystem and not config["allow_unconfined_root"]:
        raise OSError(
            "refusing to run untrusted code as root without filesystem isolation (no mount "
            "namespace, no Landlock); pass allow_unconfined_root=True to accept the risk"
        )
    setup["uid_drop"] = host_root and not setup["namespaces"] and _world_readable(sys.prefix)
    setup["network_isolated"] = (
        setup["namespaces"] or setup["landlock_abi"] >= 4 or setup["seccomp"]
    )
    setup["cgroup_memory"] = cgroups is not None and "memory" in cgroups.dirs
    setup["cgroup_pids"] = cgroups is not None and "pids" in cgroups.dirs
    setup["cgroups"] = list(cgroups.dirs.values()) if cgroups is not None else []
    limits = config["limits"]
    setup["live_runners"] = 2 if setup["namespaces"] else 1  # running, and the next one
    setup["run_cgroups"] = [
        cgroups.create_run(f"run-{slot}", limits["memory_mb"], limits["max_processes"] + 1)
        if cgroups is not None and cgroups.dirs
        else {}
        for slot in range(setup["live_runners"])
    ]
    setup["sys_path"] = [p for p in sys.path if _readable(p, setup)]  # what a run may import
    setup["base_dir"] = None if setup["mount"] else tempfile.mkdtemp(prefix="palaestra-sandbox-")
    if setup["uid_drop"]:
        os.chmod(setup["base_dir"], 0o711)
    return setup


def _readable(path: str, setup: dict) -> bool:
    real = os.path.realpath(path) if path else ""
    return any(real == p or real.startswith(p + "/") for p in setup["readable"])


def _world_readable(path: str) -> bool:
    """Whether ``nobody`` can reach ``path`` (every directory on the way searchable by others)."""
    path = os.path.realpath(path)
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def _status() -> str:
    with open("/proc/self/status") as handle:
        return handle.read()


def worker_main(config: dict) -> None:
    """Set up once, start the spawner, report; then serve each request on a ready runner."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for module in config["preload"]:
        __import__(module)
    try:
        setup, cgroups = set_up(config)
    except Exception as exc:
        write_message(1, {"error": f"{type(exc).__name__}: {exc}"})
        return
    gc.freeze()  # the spawner and its runners share these objects without copying their pages
    spawner = None
    try:
        spawner = SpawnerLink(setup)
        private = ("limits", "readable", "seccomp_program", "run_cgroups", "sys_path")
        report = {k: v for k, v in setup.items() if k not in private}
        write_message(1, {"ready": True, "uid": os.getuid(), **report})
        while True:
            monitor = Monitor(setup, cgroups, spawner)  # ready before the request arrives
            try:
                job = read_message(0)
                if job is None:
                    return  # the host closed the pipe
                serve(monitor, job)
            finally:
                monitor.close()
    finally:  # a broken spawner ends the worker too: the host starts a new one
        if spawner is not None:
            spawner.close()
        if cgroups is not None:
            with contextlib.suppress(OSError):  # the host retries once the worker is gone
                cgroups.remove()
        if setup["base_dir"]:
            remove_tree(setup["base_dir"])
