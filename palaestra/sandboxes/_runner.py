"""The runner process: confined before its request arrives, then runs it (or serves a session).

Forked by the spawner (``_spawner.py``) ahead of its run. It confines itself completely
(:func:`confine_runner`), tells the worker it is ready, then reads one request from the
worker and runs it as a fresh ``__main__``; a session runs cells until the worker closes
its requests. Its exit status is what the worker reports; nothing it writes becomes a
result field.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import resource
import signal
import sys
import traceback
import types

import _cgroups as cgroups
import _confine as confine
import _view as view
from _plumbing import all_pids, read_message, write_message

LANDLOCK_READS = 5
"""The runner's copy of the worker's Landlock read ruleset (without a mount namespace)."""


class Runner:
    """Executes code cells in one namespace (a one-shot run is a session of one cell)."""

    def __init__(self) -> None:
        self.main = types.ModuleType("__main__")
        self.cells = 0
        sys.modules["__main__"] = self.main

    def run_cell(self, code: str) -> tuple[int, bool]:
        """Run ``code``; returns (exit code, whether it asked to exit) after flushing output."""
        self.cells += 1
        filename = f"<cell {self.cells}>" if self.cells > 1 else "<sandbox>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        exit_code, exited = 0, False
        try:
            exec(compile(code, filename, "exec", dont_inherit=True), self.main.__dict__)
        except SystemExit as exc:
            exited = True
            if exc.code is None or isinstance(exc.code, int):
                exit_code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                exit_code = 1
        except MemoryError:
            exit_code = 1
            sys.stderr.write("MemoryError: the sandbox memory limit was exceeded\n")
        except BaseException as exc:
            exit_code = 1
            tb = exc.__traceback__.tb_next if exc.__traceback__ else None
            traceback.print_exception(type(exc), exc, tb)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError) as exc:
                # Like CPython at exit: a stream that cannot be flushed fails the run.
                exit_code = exit_code or 120
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(f"cannot flush output: {exc}\n")
        return exit_code, exited


def confine_runner(setup: dict, workdir: str, run_cgroup: dict) -> tuple[int, int | None]:
    """Everything that confines the runner, before any request is read (in this order).

    Returns how many processes already count against this user's RLIMIT_NPROC, and the
    seccomp listener of exit notices (None without them).
    """
    if run_cgroup:
        cgroups.join(run_cgroup)
    if setup["namespaces"]:
        confine.new_host_identity()
    if setup["mount"]:
        limits = setup["limits"]
        view.enter_root(
            limits["work_dir_mb"],
            limits["work_dir_files"],
            owner=setup["work_owner"],
            inside_work=setup["inside_work"],
        )
    with contextlib.suppress(OSError):
        confine.new_session_keyring()
    os.chdir(workdir)
    os.umask(0o077)
    if setup["run_uid"] is not None:
        _become(setup["run_uid"])
    existing = _counted_processes(setup)
    confine.prctl(confine.PR_SET_NO_NEW_PRIVS, 1)
    if setup["landlock_abi"]:
        # With a mount namespace the view is all there is to read: its root, allowed now.
        view_root = setup["mount"] and confine.landlock_read_ruleset(["/"], [])
        reads = view_root or LANDLOCK_READS
        confine.apply_landlock(setup["landlock_abi"], [workdir], reads)
    confine.drop_capabilities()  # at every level: a run that stays root keeps no power
    listener = None
    if setup["seccomp"]:
        listener = confine.apply_seccomp(setup["seccomp_program"], listener=setup["exit_notices"])
    if not setup["network_isolated"]:
        sys.addaudithook(_block_sockets_hook)
    return existing, listener


def _become(uid: int) -> None:
    """Switch to the unprivileged ``uid`` for good, without supplementary groups."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # Back to dumpable (a uid change clears it), so that the worker may still take this
    # process's seccomp listener and hold its namespaces; only this run's processes share
    # the uid, and seccomp denies them ptrace.
    confine.prctl(confine.PR_SET_DUMPABLE, 1)


def _counted_processes(setup: dict) -> int:
    """How many processes already count against the run's RLIMIT_NPROC: in a user namespace
    the live runners (and the worker and spawner where runs keep their uid); otherwise every
    process of this uid, counted before Landlock hides /proc."""
    if setup["namespaces"]:
        return setup["live_runners"] + (2 if setup["run_uid"] is None else 0)
    return _count_own_processes()


def _block_sockets_hook(event: str, args: tuple) -> None:
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        raise PermissionError(f"network access is disabled in this sandbox ({event})")


def runner_main(setup: dict, workdir: str, run_cgroup: dict, fds: list[int]) -> None:
    """Body of the runner: confine, wait for the request, then run it or serve a session.

    ``fds`` are stdout, stderr, requests and cell statuses; they become fds 1 to 4.
    """
    os.setsid()
    if setup["namespaces"]:
        confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    kept = [os.open(os.devnull, os.O_RDONLY), *fds]
    if setup["landlock_reads"] is not None:
        kept.append(setup["landlock_reads"])  # becomes LANDLOCK_READS
    for target, fd in enumerate(kept):
        os.dup2(fd, target + 100)
    for target in range(len(kept)):
        os.dup2(target + 100, target)
    os.closerange(len(kept), 1 << 16)
    existing_processes, listener = confine_runner(setup, workdir, run_cgroup)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    inherited = dict(os.environ)  # the worker's: the environment runs usually ask for
    os.environ.update(HOME=workdir, TMPDIR=workdir, PWD=workdir)
    sys.argv = ["<sandbox>"]
    sys.path[:] = [workdir, *setup["sys_path"]]
    _warm_up()
    write_message(4, {"ready": True, "listener": listener})
    job = read_message(3)
    if listener is not None:
        os.close(listener)  # the worker took its copy before sending the request
    if job is None:
        os._exit(0)
    _write_inputs(job)
    _set_rlimits(job, setup, existing_processes)
    if job["env"] != inherited:
        os.environ.clear()
        os.environ.update(job["env"], HOME=workdir, TMPDIR=workdir, PWD=workdir)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    runner = Runner()
    if not job["session"]:
        os.close(3)
        os.close(4)
        os._exit(runner.run_cell(job["code"])[0] & 0xFF)
    while (cell := read_message(3)) is not None:
        exit_code, exited = runner.run_cell(cell["code"])
        write_message(4, {"nonce": cell["nonce"], "exit_code": exit_code, "exited": exited})
        if exited:
            os._exit(exit_code & 0xFF)
    os._exit(0)


def _write_inputs(job: dict) -> None:
    """The request's files into the work dir, its stdin onto fd 0 (an in-memory file)."""
    for name, content in job["files"].items():
        os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
        with open(name, "wb") as handle:
            handle.write(content.encode("utf-8", "surrogateescape"))
    if job.get("stdin"):
        memfd = os.memfd_create("stdin")
        with open(memfd, "wb", closefd=False) as handle:
            handle.write(job["stdin"].encode("utf-8", "surrogateescape"))
        os.lseek(memfd, 0, os.SEEK_SET)
        os.dup2(memfd, 0)
        os.close(memfd)


WARM_UP = "import sys\nvalues = [str(i) * 2 for i in range(64)]\nprint(len(values), file=sys.stderr, end='')\n"


def _warm_up() -> None:
    """Run a trivial program of our own, so that the pages a run touches first are copied
    now (copy-on-write after the fork) rather than during the run."""
    namespace = {"__name__": "__warm_up__"}
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")  # noqa: SIM115
    try:
        exec(compile(WARM_UP, "<warm-up>", "exec"), namespace)
        sys.stderr.flush()
    finally:
        sys.stderr.close()
        sys.stderr = stderr


def _set_rlimits(job: dict, setup: dict, existing_processes: int) -> None:
    limits = job["limits"]
    nproc = limits["max_processes"] + existing_processes
    memory = None if "memory" in setup["cgroup_versions"] else limits["memory_mb"] << 20
    cpu = limits["session_cpu_seconds"] if job["session"] else limits["cpu_seconds"]
    for name, value in (
        ("RLIMIT_CORE", 0),
        ("RLIMIT_AS", memory),
        ("RLIMIT_FSIZE", limits["max_file_mb"] << 20),
        ("RLIMIT_NOFILE", limits["max_open_files"]),
        ("RLIMIT_NPROC", nproc),
        ("RLIMIT_CPU", cpu),
    ):
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value))


def _count_own_processes() -> int:
    """Processes of this uid (RLIMIT_NPROC counts them all when there is no user namespace)."""
    uid, count = os.getuid(), 0
    for pid in all_pids():
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            continue
    return count
