"""Sandbox worker: a warm interpreter that serves runs on confined runners forked ahead of time.

``palaestra/sandboxes/local.py`` starts this file as ``python -I -B _worker.py CONFIG_JSON``
(the docker backend sends it with ``_confine.py`` bundled). It imports only the standard
library. Process tree::

    worker (warm; own user + network namespace; the monitor: reads the host's requests,
    │       hands each to a ready runner, enforces the deadline, reports what it observed)
    └─ spawner (forked before any request; never reads one; PID 1 of a PID namespace;
       │        keeps the running runner and the next one alive, hands each one's pipes
       │        and pidfd to the worker, reaps it, kills what it left behind, relays its
       │        exit status)
       └─ runner (PID 1 of a new PID namespace; private mount, IPC and UTS namespaces
                  over a minimal read-only root with a tmpfs work dir; cgroup, fresh
                  keyring, Landlock, seccomp, no capabilities; all of it set up before
                  the request arrives (with namespaces, while the previous run is still
                  going), so a run is a hand-off to a ready process)

Each run therefore starts in a process that never ran other code, forked from one that
never saw a request. The result is what the monitor observed (exit status or signal,
timing, the memory cgroup's OOM count, peak RSS), never a message of the sandboxed code.
Sessions are the one exception: a cell's status comes from the session's interpreter
(tagged with a one-time nonce); the session is stopped (SIGSTOP) between cells. Messages
are a 4-byte big-endian length + UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import linecache
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
import traceback
import types

if "_confine" not in sys.modules:  # run as a file; the docker backend bundles it instead
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    __import__("_confine")
    del sys.path[0]
confine = sys.modules["_confine"]

NOBODY = 65534
READ_CHUNK = 65536
RSS_ESTIMATE_SHARE = 0.5  # without a memory cgroup: peak RSS share that counts as exceeded


# ----------------------------------------------------------------------------- framing


def read_message(fd: int) -> dict | None:
    """Next message on ``fd``, or None at end of file."""
    header = _read_exact(fd, 4)
    if header is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def write_message(fd: int, message: dict) -> None:
    body = json.dumps(message).encode()
    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------------- runner


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
            exec(compile(code, filename, "exec"), self.main.__dict__)
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
        confine.join(run_cgroup)
    if setup["mount"]:
        limits = setup["limits"]
        confine.enter_root(limits["work_dir_mb"], limits["work_dir_files"])
    with contextlib.suppress(OSError):
        confine.new_session_keyring()
    os.chdir(workdir)
    os.umask(0o077)
    if setup["uid_drop"]:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    # With a user namespace: the worker, the spawner and the live runners; else this uid's
    # processes, counted before /proc is hidden.
    existing = 2 + setup["live_runners"] if setup["namespaces"] else _count_own_processes()
    confine.prctl(confine.PR_SET_NO_NEW_PRIVS, 1)
    if setup["landlock_abi"]:
        readable = ["/"] if setup["mount"] else setup["readable"]
        confine.apply_landlock(setup["landlock_abi"], [workdir], readable)
    if setup["namespaces"]:
        confine.drop_capabilities()
    listener = None
    if setup["seccomp"]:
        listener = confine.apply_seccomp(setup["seccomp_program"], listener=setup["exit_notices"])
    if not setup["network_isolated"]:
        sys.addaudithook(_block_sockets_hook)
    return existing, listener


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
    for target, fd in enumerate([os.open(os.devnull, os.O_RDONLY), *fds]):
        os.dup2(fd, target + 100)
    for target in range(len(fds) + 1):
        os.dup2(target + 100, target)
    os.closerange(len(fds) + 1, 1 << 16)
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


def _readable(path: str, setup: dict) -> bool:
    real = os.path.realpath(path) if path else ""
    return any(real == p or real.startswith(p + "/") for p in setup["readable"])


def _set_rlimits(job: dict, setup: dict, existing_processes: int) -> None:
    limits = job["limits"]
    nproc = limits["max_processes"] + existing_processes
    memory = None if setup["cgroup_memory"] else limits["memory_mb"] << 20
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
    for pid in _all_pids():
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            continue
    return count


# ----------------------------------------------------------------------------- spawner


class Spawner:
    """The worker's child that forks the runners and reaps them.

    It never reads a request, so a runner forked from it inherits nothing of earlier runs.
    It keeps ``setup["live_runners"]`` runners alive (with PID namespaces two: the one
    running and the next, confined and waiting, in a cgroup slot of its own), hands each
    new runner's pipe ends and pidfd to the worker (``SCM_RIGHTS`` over a socket pair),
    reaps runners as they exit, kills what a run left behind and reports the exit status.
    With namespaces it is PID 1 of a PID namespace of the worker's user namespace, which
    lets it give each runner a PID namespace of its own (``unshare`` before the fork,
    ``setns`` back after) without an intermediate process.
    """

    HANDED = struct.Struct("=cqq")  # b"R", runner number, cgroup slot; fds attached
    REAPED = struct.Struct("=cqiq")  # b"S", runner number, wait status, peak RSS in KiB
    FDS = 5  # stdout, stderr, requests, statuses, pidfd

    def __init__(self, setup: dict) -> None:
        self.channel, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if setup["namespaces"]:
            confine.unshare(confine.CLONE_NEWPID)
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                self.channel.close()
                spawn_runners(setup, child_end)
                code = 0
            except BaseException:
                with contextlib.suppress(OSError):
                    os.write(2, traceback.format_exc().encode())
            os._exit(code)
        child_end.close()
        self.handed: list[tuple[int, int, list[int]]] = []
        self.statuses: dict[int, tuple[int, int]] = {}
        self.forgotten: set[int] = set()

    def next_runner(self) -> tuple[int, int, list[int]]:
        """The next runner: its number, cgroup slot, and the parent ends of its pipes and
        its pidfd (blocks until it is forked)."""
        while not self.handed:
            self.receive()
        return self.handed.pop(0)

    def reaped(self, number: int) -> tuple[int, int]:
        """Runner ``number``'s wait status and peak RSS (KiB), once the spawner reaped it."""
        while number not in self.statuses:
            self.receive()
        return self.statuses.pop(number)

    def forget(self, number: int) -> None:
        """Drop runner ``number``'s status, now or when it comes (its run was reported)."""
        if self.statuses.pop(number, None) is None:
            self.forgotten.add(number)

    def fileno(self) -> int:
        """Readable when the spawner has a message (for ``select``)."""
        return self.channel.fileno()

    def receive(self) -> None:
        """Take the next message: a runner handed over, or one reaped."""
        message, fds, _, _ = socket.recv_fds(self.channel, 64, self.FDS)
        if message[:1] == b"R" and len(fds) == self.FDS:
            _, number, slot = self.HANDED.unpack(message)
            self.handed.append((number, slot, fds))
        elif message[:1] == b"S" and not fds:
            _, number, wait_status, max_rss_kb = self.REAPED.unpack(message)
            if number in self.forgotten:
                self.forgotten.discard(number)
            else:
                self.statuses[number] = (wait_status, max_rss_kb)
        else:
            raise OSError("the sandbox spawner exited")

    def close(self) -> None:
        self.channel.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        for _, _, fds in self.handed:
            for fd in fds:
                os.close(fd)


def spawn_runners(setup: dict, channel: socket.socket) -> None:
    """The spawner's loop: keep the live runners forked and handed over, reap and report
    each as it exits; until the worker is gone."""
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)  # orphans of a run come back here
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY) if setup["namespaces"] else -1
    live: dict[int, tuple[int, int, str]] = {}  # pid -> runner number, cgroup slot, work dir
    numbers = itertools.count()
    while True:
        while len(live) < setup["live_runners"]:
            slot = min(set(range(setup["live_runners"])) - {s for _, s, _ in live.values()})
            workdir = "/tmp" if setup["mount"] else _host_workdir(setup)
            number = next(numbers)
            pid = _fork_runner(setup, slot, workdir, number, channel, own_pid_namespace)
            live[pid] = (number, slot, workdir)
        if setup["namespaces"]:  # the orphans of a run die with its PID namespace
            pid, wait_status, rusage = os.wait4(-1, 0)
        else:  # one live runner; its group and orphans are killed before the next is forked
            (pid,) = live
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie holds its group id
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, wait_status, rusage = os.wait4(pid, 0)
            kill_orphans()
        number, _, workdir = live.pop(pid)
        try:
            channel.send(Spawner.REAPED.pack(b"S", number, wait_status, rusage.ru_maxrss))
        except OSError:
            return
        finally:
            if not setup["mount"]:
                remove_tree(workdir)


def _fork_runner(
    setup: dict, slot: int, workdir: str, number: int, channel: socket.socket, pid_ns: int
) -> int:
    """Fork a runner into its own PID namespace and hand it to the worker; its pid."""
    (out_r, out_w), (err_r, err_w), (requests_r, requests_w), (status_r, status_w) = (
        os.pipe() for _ in range(4)
    )
    if setup["namespaces"]:
        confine.unshare(confine.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        try:
            runner_main(
                setup, workdir, setup["run_cgroups"][slot], [out_w, err_w, requests_r, status_w]
            )
        except BaseException:
            with contextlib.suppress(OSError):
                os.write(2, traceback.format_exc().encode())
        os._exit(125)
    if setup["namespaces"]:
        confine.setns(pid_ns, confine.CLONE_NEWPID)
    handed = [out_r, err_r, requests_w, status_r, os.pidfd_open(pid)]
    try:
        socket.send_fds(channel, [Spawner.HANDED.pack(b"R", number, slot)], handed)
    except OSError:  # the worker is gone
        os.kill(pid, signal.SIGKILL)
    for fd in (*handed, out_w, err_w, requests_r, status_w):
        os.close(fd)
    return pid


def _host_workdir(setup: dict) -> str:
    path = tempfile.mkdtemp(prefix="run-", dir=setup["base_dir"])
    if setup["uid_drop"]:
        os.chown(path, NOBODY, NOBODY)
    return path


# ----------------------------------------------------------------------------- monitor


class Monitor:
    """The worker's side of one runner: hands it the request, enforces the deadline and
    reports what it observed."""

    def __init__(self, setup: dict, cgroups: confine.Cgroups | None, spawner: Spawner) -> None:
        self.setup = setup
        self.cgroups = cgroups
        self.spawner = spawner
        limits = setup["limits"]
        self.number, slot, fds = spawner.next_runner()
        self.out_r, self.err_r, self.requests_w, self.status_r, self.pidfd = fds
        self.run_cgroup = setup["run_cgroups"][slot]
        self.oom_kills = cgroups.oom_kills(self.run_cgroup) if self.run_cgroup else 0
        ready = read_message(self.status_r)
        self.ready = ready is not None
        self.runner_pid = _pid_of(self.pidfd) if self.ready else None
        self.namespace_fds = [
            os.open(f"/proc/{self.runner_pid}/ns/{kind}", os.O_RDONLY)
            for kind in (("mnt", "ipc") if setup["mount"] and self.runner_pid else ())
        ]  # held until after the reply, so the namespaces are torn down off the critical path
        self.listener = None  # exit notices: the exit status before the runner's teardown
        if self.runner_pid and ready.get("listener") is not None:
            try:
                self.listener = confine.pidfd_getfd(self.pidfd, ready["listener"])
            except OSError:  # unanswered, its exit_group calls would end one thread each
                self.ready = False
        self.exit_noticed = False
        for fd in (self.out_r, self.err_r, self.status_r):
            os.set_blocking(fd, False)
        self.status_buffer = b""
        self.alive = True
        self.exit_code: int | None = None
        self.max_rss_kb = 0
        self.cap = limits["max_output_bytes"]
        self.memory_mb = limits["memory_mb"]

    def startup_error(self) -> str:
        """Why the runner died before it was ready (the last line of its traceback)."""
        self.stop()
        stderr = bytearray()
        self._drain(self.err_r, stderr, {self.err_r: 0})
        reason = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason"]
        return f"sandbox runner failed to start: {reason[0]}"

    def start(self, job: dict) -> None:
        """Hand the request to the waiting runner (limits of this run first)."""
        self.cap = job["limits"]["max_output_bytes"]
        self.memory_mb = job["limits"]["memory_mb"]
        if self.run_cgroup and self.memory_mb != self.setup["limits"]["memory_mb"]:
            self.cgroups.set_memory(self.run_cgroup, self.memory_mb)  # close() restores it
        with contextlib.suppress(BrokenPipeError):
            write_message(self.requests_w, {k: v for k, v in job.items() if k != "id"})

    def execute(self, code: str | None, timeout: float) -> dict:
        """Run one cell (``code``; None for a one-shot run) and report what was observed."""
        started = time.perf_counter()
        nonce = os.urandom(16).hex()
        if code is not None:
            self._signal_run(signal.SIGCONT)
            with contextlib.suppress(BrokenPipeError):
                write_message(self.requests_w, {"code": code, "nonce": nonce})
        output = {self.out_r: bytearray(), self.err_r: bytearray()}
        dropped = {self.out_r: 0, self.err_r: 0}
        deadline = started + timeout
        status, timed_out = None, False
        watched = [self.out_r, self.err_r, self.spawner]
        watched += [fd for fd in (self.status_r if code else None, self.listener) if fd is not None]
        while status is None and self.alive:
            left = deadline - time.perf_counter()
            if left <= 0:
                timed_out = True
                break
            for fd in select.select(watched, [], [], left)[0]:
                if fd in output:
                    if self._drain(fd, output[fd], dropped):
                        watched.remove(fd)  # closed by the run: no busy loop on end of file
                elif fd == self.status_r:
                    status = self._read_status(nonce)
                elif fd == self.listener:
                    self._take_exit_notice()
                else:  # the spawner reports exits: one wake-up, not one per pidfd and status
                    self.spawner.receive()
                    self.alive = self.number not in self.spawner.statuses
        duration = time.perf_counter() - started
        exit_code = None
        if timed_out or code is None or status is None or status["exited"]:
            exit_code = self.stop()
        else:
            self._signal_run(signal.SIGSTOP)  # no CPU for the session between cells
        for fd in output:
            self._drain(fd, output[fd], dropped)
        if status is not None and (exit_code is None or status["exited"]):
            # A cell that exited said with what (its runner is killed before it can finish
            # exiting: with exit notices it waits for an answer that comes no more).
            exit_code = status["exit_code"]
        return {
            "stdout": output[self.out_r].decode("utf-8", "replace"),
            "stderr": output[self.err_r].decode("utf-8", "replace"),
            "exit_code": -signal.SIGKILL if timed_out else exit_code,
            "timed_out": timed_out,
            "memory_exceeded": self._memory_exceeded(exit_code),
            "duration": duration,
            "truncated": any(dropped.values()),
            "session_alive": self.alive,
        }

    def _take_exit_notice(self) -> None:
        """Let a process of the run go on exiting; the runner's own exit ends the run, with
        the status it exits with (the teardown of its memory happens after the reply)."""
        try:
            pid, _, status = confine.receive_notice(self.listener)
        except OSError:  # it was killed while it waited
            return
        if pid == self.runner_pid:
            self.alive = False
            self.exit_code = status & 0xFF
            self.exit_noticed = True

    def _memory_exceeded(self, exit_code: int | None) -> bool:
        if self.run_cgroup.get("memory"):
            return self.cgroups.oom_kills(self.run_cgroup) > self.oom_kills
        if not exit_code:
            return False
        return self.max_rss_kb * 1024 >= RSS_ESTIMATE_SHARE * (self.memory_mb << 20)

    def _drain(self, fd: int, kept: bytearray, dropped: dict[int, int]) -> bool:
        """Read what ``fd`` holds into ``kept`` (up to the cap); True at end of file."""
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            room = self.cap - len(kept)
            if room > 0:
                kept += chunk[:room]
            dropped[fd] += max(0, len(chunk) - max(room, 0))

    def _read_status(self, nonce: str) -> dict | None:
        """The runner's status of the current cell; messages of other cells are dropped and
        a malformed one, or the pipe closed, ends the session."""
        try:
            chunk = os.read(self.status_r, READ_CHUNK)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            self.stop()
            return None
        self.status_buffer += chunk or b""
        while len(self.status_buffer) >= 4:
            size = struct.unpack(">I", self.status_buffer[:4])[0]
            if len(self.status_buffer) < 4 + size:
                return None
            body, self.status_buffer = (
                self.status_buffer[4 : 4 + size],
                self.status_buffer[4 + size :],
            )
            try:
                status = json.loads(body)
                valid = (
                    type(status) is dict
                    and type(status.get("exit_code")) is int
                    and -255 <= status["exit_code"] <= 255
                    and type(status.get("exited")) is bool
                )
            except ValueError:
                valid = False
            if not valid:
                self.stop()
                return None
            if status.get("nonce") == nonce:
                return status
        return None

    def _signal_run(self, signum: int) -> None:
        """Send ``signum`` to every process of the run, until no new one appears."""
        done: set[int] = set()
        while self.alive:
            pids = set(self._run_pids()) - done
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)
            done |= pids

    def _run_pids(self) -> list[int]:
        if self.run_cgroup.get("pids"):
            return self.cgroups.pids(self.run_cgroup)
        found, frontier = [], [self.spawner.pid]  # the runner, and orphans of the run
        while frontier:
            children = [c for pid in frontier for c in _children(pid)]
            found += children
            frontier = children
        return found

    def stop(self) -> int:
        """Kill the runner and everything it started; returns the runner's exit code."""
        if self.exit_code is not None:
            return self.exit_code
        self.alive = False
        if not self.setup["namespaces"] and self.runner_pid:  # its whole group, at once
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.runner_pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        wait_status, self.max_rss_kb = self.spawner.reaped(self.number)  # orphans died first
        self.exit_code = os.waitstatus_to_exitcode(wait_status)
        return self.exit_code

    def close(self) -> None:
        """End the run: no process, cgroup or file of it is left afterwards."""
        with contextlib.suppress(OSError):
            os.close(self.requests_w)
        if self.exit_noticed:  # exiting already; reaped by the spawner while the next run goes
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)  # even if the exit stalls
            self.spawner.forget(self.number)
        else:
            self.stop()
        default_mb = self.setup["limits"]["memory_mb"]
        if self.run_cgroup and self.memory_mb != default_mb:
            self.cgroups.set_memory(self.run_cgroup, default_mb)  # what the next run expects
        listener = [self.listener] if self.listener is not None else []
        for fd in (
            self.out_r,
            self.err_r,
            self.status_r,
            self.pidfd,
            *listener,
            *self.namespace_fds,
        ):
            os.close(fd)


def _pid_of(pidfd: int) -> int | None:
    """The process id behind ``pidfd`` in this process's PID namespace (None once it exited)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as handle:
        for line in handle:
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                return pid if pid > 0 else None
    return None


def kill_orphans() -> None:
    """Kill and reap every remaining child (orphans are reparented to this subreaper)."""
    while True:
        for pid in _children(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:  # reap every dead one before listing again
                pass
        except ChildProcessError:
            return


def _children(parent: int) -> list[int]:
    """Pids whose parent is ``parent``."""
    try:
        found = []
        for tid in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{tid}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        return found
    except OSError:
        return [pid for pid in _all_pids() if _parent_of(pid) == parent]


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def remove_tree(path: str) -> None:
    """Delete ``path`` however deep, however its permissions were changed (no recursion).

    Subdirectories are pulled up into the top directory one level at a time, so neither
    the path length nor the number of open descriptors grows with the depth.
    """
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, stat.S_IRWXU)
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        prefix, moved = f".pulled-{os.urandom(8).hex()}-", 0
        try:
            while True:
                entries = list(os.scandir(top))
                if not entries:
                    break
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        os.unlink(entry.name, dir_fd=top)
                        continue
                    os.chmod(entry.name, stat.S_IRWXU, dir_fd=top)
                    inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
                    try:
                        for child in os.listdir(inner):
                            moved += 1
                            os.rename(child, f"{prefix}{moved}", src_dir_fd=inner, dst_dir_fd=top)
                    finally:
                        os.close(inner)
                    os.rmdir(entry.name, dir_fd=top)
        finally:
            os.close(top)
        os.rmdir(path)


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


# ----------------------------------------------------------------------------- worker


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
        spawner = Spawner(setup)
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


if __name__ == "__main__":
    worker_main(json.loads(sys.argv[1]))
