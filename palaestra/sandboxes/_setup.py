"""The worker's set-up: which mechanism confines each run on this machine (worker process code).

Run once when a worker starts, before the spawner is forked. Each step uses a mechanism where
the OS allows it, requires it where the configuration says ``True`` (raising otherwise) and
leaves it out where it says ``False``; probes in child processes check that a run can enter
what was set up. The result (``setup``) is what the spawner and the runners follow, and what
the host reports (``isolation_report()``).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import sys
import tempfile

import _confine as confine
import _view as view
from _cgroups import Cgroups

DEDICATED_UID_BASE = 0x70000000
"""A root host's runs use host uid ``DEDICATED_UID_BASE`` + the worker's pid: unprivileged,
one per worker, in a range (1879048192 and up) that neither distributions nor systemd hand
out."""


def set_up(config: dict) -> tuple[dict, Cgroups | None]:
    """Enter the worker's namespaces and find out what confines each run (or raise, leaving
    no cgroup behind)."""
    cgroups = None
    if config["cgroups"] is not False:
        cgroups = Cgroups(f"palaestra-sandbox-{os.getpid()}")
    try:
        if config["cgroups"] and "memory" not in cgroups.dirs:
            raise OSError(
                "no usable memory cgroup (cgroup v1 needs root; cgroup v2 a delegated subtree)"
            )
        return _set_up_mechanisms(config, cgroups), cgroups
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        raise


def _set_up_mechanisms(config: dict, cgroups: Cgroups | None) -> dict:
    host_root = os.geteuid() == 0
    dedicated = DEDICATED_UID_BASE + os.getpid() if host_root else None
    setup = {"limits": config["limits"], "host_root": host_root}
    setup["readable"] = view.readable_paths(config["readable"])
    setup["hidden"] = view.hidden_paths(config["hidden"], config.get("task_sources", []))
    _enter_namespaces(setup, config, dedicated)
    setup["landlock_abi"] = 0
    if config["landlock"] is not False:
        setup["landlock_abi"] = confine.landlock_abi()
        if config["landlock"] and not setup["landlock_abi"]:
            raise OSError("Landlock is not available in this kernel")
    _choose_user(setup, dedicated)
    _choose_seccomp(setup, config, cgroups)
    filesystem = setup["mount"] or setup["landlock_abi"]
    if host_root and not filesystem and not config["allow_unconfined_root"]:
        raise OSError(
            "refusing to run untrusted code as root without filesystem isolation (no mount "
            "namespace, no Landlock); pass allow_unconfined_root=True to accept the risk"
        )
    _set_up_runs(setup, cgroups)
    return setup


def _enter_namespaces(setup: dict, config: dict, dedicated: int | None) -> None:
    """User and network namespaces, and the mount view where it can be entered."""
    setup["namespaces"] = setup["mount"] = setup["own_budgets"] = False
    if config["namespaces"] is not False:
        try:
            setup["own_budgets"] = confine.enter_user_namespace(dedicated)
            setup["namespaces"] = True
        except OSError as exc:
            if config["namespaces"]:
                raise OSError(f"cannot create user/network namespaces: {exc}") from exc
    setup["inside_work"] = view.inside_work(setup["readable"])
    if setup["namespaces"] and config["mount"] is not False:
        with contextlib.suppress(OSError):
            view.build_template_root(setup["readable"], setup["hidden"])
            setup["mount"] = _probe(setup, None, enter_view=True) == 0
    if config["mount"] and not setup["mount"]:
        raise OSError("cannot build a private mount namespace here")


def _choose_user(setup: dict, dedicated: int | None) -> None:
    """The uid runs switch to (``run_uid``; None: they keep the worker's). As root that is an
    unprivileged uid of the worker's own (in the user namespace, ``sandbox`` mapped to it),
    where it can read the Python installation in the view; runs stay root otherwise."""
    candidate = None
    if dedicated is not None:
        candidate = confine.SANDBOX_UID if setup["namespaces"] else dedicated
    if candidate is not None and _probe(setup, candidate, enter_view=setup["mount"]) != 0:
        candidate = None
    setup["run_uid"] = candidate
    setup["work_owner"] = os.getuid() if candidate is None else candidate


def _probe(setup: dict, uid: int | None, *, enter_view: bool) -> int:
    """In a child as a run would be (its PID namespace, the view if ``enter_view``, as
    ``uid``): 0 if the Python installation is readable there, 1 if the view cannot be
    entered, 2 if the installation is unreadable."""
    pid = os.fork()
    if pid == 0:
        code = 1
        with contextlib.suppress(BaseException):
            if setup["namespaces"]:
                confine.unshare(confine.CLONE_NEWPID)
            inner = os.fork()
            if inner == 0:
                os._exit(_probe_as_a_run(setup, uid, enter_view))
            code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _probe_as_a_run(setup: dict, uid: int | None, enter_view: bool) -> int:
    try:
        if enter_view:
            owner = os.getuid() if uid is None else uid
            view.enter_root(1, 64, owner=owner, inside_work=setup["inside_work"])
        if uid is not None:
            _become(uid)
    except BaseException:
        return 1
    return 0 if view.python_readable() else 2


def _become(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _choose_seccomp(setup: dict, config: dict, cgroups: Cgroups | None) -> None:
    setup["seccomp"] = setup["exit_notices"] = False
    if config["seccomp"] is False:
        setup["seccomp_program"] = None
        return
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
        and exit_notices_work(setup["run_uid"])
    )
    program = confine.seccomp_filter(
        unix_sockets=setup["mount"],
        metadata=setup["mount"],
        host_ipc=not setup["namespaces"],
        host_pids=not setup["namespaces"],
        exit_notices=setup["exit_notices"],
    )
    setup["seccomp_program"] = program if setup["seccomp"] else None


def exit_notices_work(uid: int | None) -> bool:
    """Whether this process can take the seccomp listener of a child that runs as ``uid``,
    hear its exit and let it go on exiting (old kernels, containers and ptrace policies
    refuse a step)."""
    (fd_r, fd_w), (go_r, go_w) = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(BaseException):
            if uid is not None:
                _become(uid)
                confine.prctl(confine.PR_SET_DUMPABLE, 1)
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


def _set_up_runs(setup: dict, cgroups: Cgroups | None) -> None:
    """The run slots' cgroups, the import path, Landlock's rules and the work dirs' parent."""
    setup["network_isolated"] = (
        setup["namespaces"] or setup["landlock_abi"] >= 4 or setup["seccomp"]
    )
    setup["cgroup_versions"] = dict(cgroups.version) if cgroups is not None else {}
    setup["cgroups"] = list(dict.fromkeys(cgroups.dirs.values())) if cgroups is not None else []
    limits = setup["limits"]
    setup["live_runners"] = 2 if setup["namespaces"] else 1  # running, and the next one
    setup["run_cgroups"] = [
        cgroups.create_run(f"run-{slot}", limits["memory_mb"], limits["max_processes"] + 1)
        if cgroups is not None and cgroups.dirs
        else {}
        for slot in range(setup["live_runners"])
    ]
    setup["spawner_cgroups"] = cgroups.shared() if cgroups is not None else {}
    setup["sys_path"] = [p for p in sys.path if _readable(p, setup)]  # what a run may import
    setup["base_dir"] = None if setup["mount"] else tempfile.mkdtemp(prefix="palaestra-sandbox-")
    if setup["base_dir"] and setup["run_uid"] is not None:
        os.chmod(setup["base_dir"], stat.S_IRWXU | stat.S_IXGRP | stat.S_IXOTH)
    setup["landlock_reads"] = None  # with a mount namespace, each run allows reading its view
    if setup["landlock_abi"] and not setup["mount"]:
        readable, listable = view.landlock_rules(setup["readable"], setup["hidden"])
        reads = confine.landlock_read_ruleset([*readable, setup["base_dir"]], listable)
        setup["landlock_reads"] = reads  # inherited by the spawner and each runner


def _readable(path: str, setup: dict) -> bool:
    real = os.path.realpath(path) if path else ""
    inside = any(real == p or real.startswith(p + "/") for p in setup["readable"])
    return inside and not any(real == p or real.startswith(p + "/") for p in setup["hidden"])


def _status() -> str:
    with open("/proc/self/status") as handle:
        return handle.read()
