"""Sandbox worker: a warm interpreter that runs untrusted code in forked, confined children.

``palaestra/sandboxes/local.py`` starts this file as ``python -I -B _worker.py CONFIG_JSON``;
it imports only the standard library, so a fork of it is cheap. Process tree per request::

    worker (warm; root dropped to nobody; own user + network namespace)
      └─ monitor (one per run or session; new PID namespace for its child; subreaper;
         owns the private work dir, the output pipes, the deadline)
           └─ runner (PID 1 of that namespace; rlimits, Landlock, no capabilities;
              executes the code in-process, no interpreter start-up)

Killing the runner (PID 1) makes the kernel kill every process in its namespace; without
namespaces the monitor kills the runner's process group and then every orphan it reaped
as subreaper. Messages on stdin/stdout (and between monitor and runner) are a 4-byte
big-endian length followed by UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import linecache
import os
import resource
import select
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time
import traceback
import types

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 4, 38, 36
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
SYS_CAPSET = 126
RUNNER_FDS = {"status": 3, "commands": 4}
READ_CHUNK = 65536
_libc = ctypes.CDLL(None, use_errno=True)


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


# ----------------------------------------------------------------------------- kernel calls


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel (0 when unavailable)."""
    if not sys.platform.startswith("linux"):
        return 0
    result = _libc.syscall(
        SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
    return max(result, 0)


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces() -> None:
    """Own user and network namespaces (no interfaces up: no network at all)."""
    uid, gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1")


CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")


def enter_pids_cgroup(max_pids: int) -> str | None:
    """As root, RLIMIT_NPROC is not enforced: cap this worker's process tree with a pids cgroup.

    Returns the cgroup directory (the host removes it once the worker has exited), or None
    where no writable pids controller exists.
    """
    for root in CGROUP_ROOTS:
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        if root == "/sys/fs/cgroup" and "pids" not in _read(f"{root}/cgroup.subtree_control"):
            continue
        path = os.path.join(root, f"palaestra-sandbox-{os.getpid()}")
        try:
            os.mkdir(path)
            _write_file(os.path.join(path, "pids.max"), str(max_pids))
            _write_file(os.path.join(path, "cgroup.procs"), str(os.getpid()))
        except OSError:
            continue
        return path
    return None


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def drop_capabilities() -> None:
    """Clear every capability (the runner has them inside its user namespace)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(SYS_CAPSET, header, data), "capset")


# Landlock access rights (linux/landlock.h).
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_FS_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (1 << 14) | (1 << 15)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


SYSTEM_READABLE = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys/devices/system/cpu",
    "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random",
    "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/passwd", "/etc/group",
    "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/mime.types", "/etc/os-release",
)  # fmt: skip


def readable_paths(extra: list[str]) -> list[str]:
    """What sandboxed code may read: system libraries, this Python and its packages, ``extra``."""
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    python.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths = [*SYSTEM_READABLE, *python, *(p for p in sys.path if p), *extra]
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p)))


def apply_landlock(abi: int, workdir: str, readable: list[str]) -> None:
    """Reads only from ``readable``, writes only in ``workdir`` (and /dev/null); no TCP
    (ABI >= 4); no signals or abstract sockets to processes outside (ABI >= 6)."""
    handled_fs = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_READ_DIR
    handled_fs |= _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_ALL
    if abi >= 2:
        handled_fs |= _FS_REFER
    if abi >= 3:
        handled_fs |= _FS_TRUNCATE
    attr = _RulesetAttr(handled_fs, 0, 0)
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16
    ruleset = _check(
        _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    read_only = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    rules = [(path, read_only) for path in readable]
    rules += [(workdir, handled_fs), ("/dev/null", _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE)]
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= _FS_FILE_ONLY
                rule = _PathBeneathAttr(access & handled_fs, fd)
                _check(
                    _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0),
                    "landlock_add_rule",
                )
            finally:
                os.close(fd)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _block_sockets_hook(event: str, args: tuple) -> None:
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        raise PermissionError(f"network access is disabled in this sandbox ({event})")


# ----------------------------------------------------------------------------- runner


class Runner:
    """Executes code cells in one namespace (a one-shot run is a session of one cell)."""

    def __init__(self) -> None:
        self.main = types.ModuleType("__main__")
        self.cells = 0
        sys.modules["__main__"] = self.main

    def run_cell(self, code: str) -> dict:
        """Run ``code``; returns its status (exit code, memory error) after flushing output."""
        self.cells += 1
        filename = f"<cell {self.cells}>" if self.cells > 1 else "<sandbox>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        status = {"exit_code": 0, "memory_error": False, "exited": False}
        try:
            exec(compile(code, filename, "exec"), self.main.__dict__)
        except SystemExit as exc:
            status["exited"] = True
            if exc.code is None or isinstance(exc.code, int):
                status["exit_code"] = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                status["exit_code"] = 1
        except MemoryError:
            status.update(exit_code=1, memory_error=True)
            sys.stderr.write("MemoryError: the sandbox memory limit was exceeded\n")
        except BaseException as exc:
            status["exit_code"] = 1
            tb = exc.__traceback__.tb_next if exc.__traceback__ else None
            traceback.print_exception(type(exc), exc, tb)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError) as exc:
                # Like CPython at exit: a stream that cannot be flushed fails the run.
                status["exit_code"] = status["exit_code"] or 120
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(f"cannot flush output: {exc}\n")
        return status


def runner_main(job: dict, workdir: str, fds: list[int]) -> None:
    """Body of the runner process: confine, then run one cell or serve a session.

    ``fds`` are stdin, stdout, stderr, status and commands; they become fds 0 to 4.
    """
    os.setsid()
    if job["namespaces"]:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), 1 << 16)
    os.chdir(workdir)
    os.umask(0o077)
    limits = job["limits"]
    nproc = limits["max_processes"] + (3 if job["namespaces"] else _count_own_processes())
    for name, value in (
        ("RLIMIT_CORE", 0),
        ("RLIMIT_AS", limits["memory_mb"] << 20),
        ("RLIMIT_FSIZE", limits["max_file_mb"] << 20),
        ("RLIMIT_NOFILE", limits["max_open_files"]),
        ("RLIMIT_NPROC", nproc),
        ("RLIMIT_CPU", None if job["session"] else limits["cpu_seconds"]),
    ):
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value))
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if job["landlock_abi"]:
        apply_landlock(job["landlock_abi"], workdir, job["readable"])
    if not job["network_isolated"]:
        sys.addaudithook(_block_sockets_hook)
    drop_capabilities()
    os.environ.clear()
    os.environ.update(job["env"], HOME=workdir, TMPDIR=workdir, PWD=workdir)
    sys.argv = ["<sandbox>"]
    sys.path[0] = workdir
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    runner = Runner()
    if not job["session"]:
        status = runner.run_cell(job["code"])
        write_message(RUNNER_FDS["status"], status)
        os._exit(status["exit_code"] & 0xFF)
    while (command := read_message(RUNNER_FDS["commands"])) is not None:
        status = runner.run_cell(command["code"])
        write_message(RUNNER_FDS["status"], status)
        if status["exited"]:
            os._exit(status["exit_code"] & 0xFF)
    os._exit(0)


def _count_own_processes() -> int:
    """Processes of this uid (RLIMIT_NPROC counts them all when there is no user namespace)."""
    uid, count = os.getuid(), 0
    for pid in _all_pids():
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            continue
    return count


# ----------------------------------------------------------------------------- monitor


class Monitor:
    """Owns one runner: starts it, feeds it, collects capped output, enforces deadlines."""

    def __init__(self, job: dict, base_dir: str) -> None:
        self.job = job
        self.cap = job["limits"]["max_output_bytes"]
        if job["namespaces"]:
            _unshare(CLONE_NEWPID)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.workdir = tempfile.mkdtemp(prefix="run-", dir=base_dir)
        for name, content in job["files"].items():
            path = os.path.join(self.workdir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(content.encode("utf-8", "surrogateescape"))
        stdin_fd = self._stdin_fd(job.get("stdin") or "", base_dir)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        commands_r, commands_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                runner_main(job, self.workdir, [stdin_fd, out_w, err_w, status_w, commands_r])
            except BaseException:
                traceback.print_exc()
            os._exit(125)
        for fd in (stdin_fd, out_w, err_w, status_w, commands_r):
            os.close(fd)
        self.pidfd = os.pidfd_open(self.pid)
        self.out_r, self.err_r, self.status_r, self.commands_w = out_r, err_r, status_r, commands_w
        for fd in (out_r, err_r, status_r):
            os.set_blocking(fd, False)
        self.status_buffer = b""
        self.alive = True

    @staticmethod
    def _stdin_fd(text: str, base_dir: str) -> int:
        if not text:
            return os.open(os.devnull, os.O_RDONLY)
        with tempfile.TemporaryFile(dir=base_dir) as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
            handle.flush()
            fd = os.dup(handle.fileno())
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def execute(self, code: str | None, timeout: float) -> dict:
        """Run one cell (``code``; None for the one-shot job already started) and report it."""
        started = time.monotonic()
        if code is not None:
            write_message(self.commands_w, {"code": code})
        output = {self.out_r: bytearray(), self.err_r: bytearray()}
        dropped = {self.out_r: 0, self.err_r: 0}
        deadline = started + timeout
        status, timed_out = None, False
        while status is None and self.alive:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select(
                [self.out_r, self.err_r, self.status_r, self.pidfd], [], [], left
            )
            for fd in ready:
                if fd in output:
                    self._drain(fd, output[fd], dropped)
                elif fd == self.status_r:
                    status = self._read_status()
                else:
                    self.alive = False
        duration = time.monotonic() - started
        if status is None and not timed_out and self.alive is False:
            status = self._read_status()
        if timed_out or not self.job["session"] or status is None or status.get("exited"):
            exit_code = self.stop()
            if status is None:
                status = {"exit_code": exit_code, "memory_error": False}
        for fd in output:
            self._drain(fd, output[fd], dropped)
        return {
            "stdout": output[self.out_r].decode("utf-8", "replace"),
            "stderr": output[self.err_r].decode("utf-8", "replace"),
            "exit_code": status["exit_code"] if not timed_out else -signal.SIGKILL,
            "timed_out": timed_out,
            "memory_exceeded": bool(status.get("memory_error")),
            "duration": duration,
            "truncated": any(dropped.values()),
            "session_alive": self.alive,
        }

    def _drain(self, fd: int, kept: bytearray, dropped: dict[int, int]) -> None:
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return
            if not chunk:
                return
            room = self.cap - len(kept)
            if room > 0:
                kept += chunk[:room]
            dropped[fd] += max(0, len(chunk) - max(room, 0))

    def _read_status(self) -> dict | None:
        with contextlib.suppress(BlockingIOError):
            self.status_buffer += os.read(self.status_r, READ_CHUNK)
        if len(self.status_buffer) < 4:
            return None
        size = struct.unpack(">I", self.status_buffer[:4])[0]
        if len(self.status_buffer) < 4 + size:
            return None
        body, self.status_buffer = self.status_buffer[4 : 4 + size], self.status_buffer[4 + size :]
        return json.loads(body)

    def stop(self) -> int:
        """Kill the runner and everything it started; returns the runner's exit code."""
        self.alive = False
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.pid, signal.SIGKILL)
        _, wait_status = os.waitpid(self.pid, 0)
        kill_orphans()
        return os.waitstatus_to_exitcode(wait_status)

    def close(self) -> None:
        if self.alive:
            os.close(self.commands_w)
            self.stop()
        remove_tree(self.workdir)


def kill_orphans() -> None:
    """Kill and reap every remaining child (orphans are reparented to this subreaper)."""
    while True:
        for pid in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _children() -> list[int]:
    """Pids whose parent is this process."""
    me = os.getpid()
    try:
        found = []
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        return found
    except OSError:
        return [pid for pid in _all_pids() if _parent_of(pid) == me]


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def remove_tree(path: str) -> None:
    """Delete ``path`` even if the code removed permissions from its own files."""

    def make_writable(function, failed_path, _exc) -> None:
        parent = os.path.dirname(failed_path)
        os.chmod(parent, stat.S_IRWXU)
        if os.path.isdir(failed_path) and not os.path.islink(failed_path):
            os.chmod(failed_path, stat.S_IRWXU)
        function(failed_path)

    shutil.rmtree(path, onexc=make_writable) if sys.version_info >= (3, 12) else shutil.rmtree(
        path, onerror=make_writable
    )


def monitor_main(job: dict, base_dir: str) -> None:
    """Serve one run, or a session's cells until the host closes it or the runner dies."""
    monitor = Monitor(job, base_dir)
    if not job["session"]:
        try:
            result = monitor.execute(None, job["timeout"])
        finally:
            monitor.close()
        write_message(1, {**result, "id": job["id"]})
        return
    try:
        write_message(1, {"started": True, "id": job["id"]})
        while monitor.alive and (request := read_message(0)) is not None:
            if request.get("op") == "close":
                break
            result = monitor.execute(request["code"], request["timeout"])
            write_message(1, {**result, "id": request["id"]})
    finally:
        monitor.close()


# ----------------------------------------------------------------------------- worker


def worker_main(config: dict) -> None:
    """Set up isolation once, report it, then serve requests: one forked monitor each."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for module in config["preload"]:
        __import__(module)
    report = {"namespaces": False, "landlock_abi": 0, "uid": os.getuid(), "cgroup": None}
    try:
        if os.geteuid() == 0:
            report["cgroup"] = enter_pids_cgroup(config["max_processes"] + 3)
        if config["namespaces"] is not False:
            try:
                enter_namespaces()
                report["namespaces"] = True
            except OSError as exc:
                if config["namespaces"]:
                    raise OSError(f"cannot create user/network namespaces: {exc}") from exc
        if config["landlock"] is not False:
            report["landlock_abi"] = landlock_abi()
            if config["landlock"] and not report["landlock_abi"]:
                raise OSError("Landlock is not available in this kernel")
        base_dir = tempfile.mkdtemp(prefix="palaestra-sandbox-")
        report["base_dir"] = base_dir
    except Exception as exc:
        write_message(1, {"error": f"{type(exc).__name__}: {exc}"})
        return
    write_message(1, {"ready": True, **report})
    network_isolated = report["namespaces"] or report["landlock_abi"] >= 4
    readable = readable_paths(config["readable"]) if report["landlock_abi"] else []
    try:
        while (job := read_message(0)) is not None:
            job.update(
                namespaces=report["namespaces"],
                landlock_abi=report["landlock_abi"],
                network_isolated=network_isolated,
                readable=readable,
            )
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    monitor_main(job, base_dir)
                except BaseException as exc:
                    write_message(1, {"error": f"sandbox monitor failed: {exc!r}", "id": job["id"]})
                    code = 1
                os._exit(code)
            _, wait_status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(wait_status) < 0:
                write_message(1, {"error": "sandbox monitor was killed", "id": job["id"]})
    finally:
        remove_tree(base_dir)


if __name__ == "__main__":
    worker_main(json.loads(sys.argv[1]))
