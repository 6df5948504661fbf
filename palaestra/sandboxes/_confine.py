"""Kernel mechanisms that confine a sandboxed run, through system calls (standard library only).

Loaded by the sandbox worker (``palaestra/sandboxes/_worker.py``), never imported by the
host. Each function does one thing and raises ``OSError`` when the kernel refuses:

* namespaces: user + network (once per worker), then per run PID, mount, IPC and UTS;
* :func:`build_template_root` (once per worker) and :func:`enter_root` (per run): a
  private mount namespace whose root is a read-only tmpfs holding read-only binds of the
  system, the Python installation and extra paths, a fresh ``/proc``, a few device nodes
  and a size- and inode-limited tmpfs as ``/tmp`` (the work dir);
* Landlock (read / write allow-lists, no TCP, no signals or abstract sockets outside);
* a seccomp BPF filter (:func:`seccomp_filter`) that denies the dangerous system calls;
* cgroups (:class:`Cgroups`): a memory and pids cgroup per run;
* a fresh session keyring, no capabilities.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import site
import stat
import struct
import sys
import sysconfig
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x2000000  # fmt: skip
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_SET_SECCOMP = 1, 38, 36, 22
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)

X86_64 = platform.machine() in ("x86_64", "AMD64")
SYS = {
    "capset": 126, "pivot_root": 155, "keyctl": 250, "mount_setattr": 442,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
} if X86_64 else {
    "capset": 91, "pivot_root": 41, "keyctl": 219, "mount_setattr": 442,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
}  # fmt: skip


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, flags: int) -> None:
    _check(_libc.setns(fd, flags), "setns")


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _read_file(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


# ----------------------------------------------------------------------------- namespaces


def enter_user_namespace() -> None:
    """Own user and network namespaces (no interfaces up: no network at all)."""
    uid, gid = os.geteuid(), os.getegid()
    unshare(CLONE_NEWUSER | CLONE_NEWNET)
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1")


def readable_paths(extra: list[str]) -> list[str]:
    """What sandboxed code may read: system libraries, this Python's installation, ``extra``.

    Only the interpreter's prefixes, standard library and site-packages: never other
    ``sys.path`` entries such as an editable checkout or the current directory.
    """
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    python.append(os.path.dirname(os.path.realpath(sys.executable)))
    python += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    python += site.getsitepackages()
    paths = [*SYSTEM_READABLE, *python, *extra]
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.exists(p)))


SYSTEM_READABLE = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
    "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/passwd", "/etc/group",
    "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/mime.types", "/etc/os-release",
)  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    result = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]  # fmt: skip


def _make_read_only(path: str) -> None:
    """Read-only, nosuid, nodev for the bind at ``path`` and everything mounted below it."""
    attr = _MountAttr(0x1 | 0x2 | 0x4, 0, 0, 0)  # MOUNT_ATTR_RDONLY | NOSUID | NODEV
    at_fdcwd, at_recursive = -100, 0x8000
    result = _libc.syscall(
        SYS["mount_setattr"], at_fdcwd, path.encode(), at_recursive,
        ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
    )  # fmt: skip
    if result < 0:  # kernels before 5.12: remount the top mount, keeping its locked flags
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        if os.statvfs(path).f_flag & os.ST_NOEXEC:
            flags |= MS_NOEXEC
        _mount(None, path, None, flags)


def _bind(source: str, root: str) -> None:
    target = root + source
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    _make_read_only(target)


def build_template_root(readable: list[str], root: str = "/tmp") -> None:
    """Enter a private mount namespace holding, at ``root``, the read-only root of every run.

    Called once per worker: a tmpfs with read-only binds of ``readable``, the host's
    top-level symlinks (``/bin`` -> ``usr/bin``), a few device nodes and empty ``/proc``
    and ``/tmp`` for :func:`enter_root`. ``root`` is hidden from the worker itself.
    """
    unshare(CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=755")
    covered: list[str] = []
    for path in sorted(readable, key=len):
        if any(path == done or path.startswith(done + "/") for done in covered):
            continue
        _bind(path, root)
        covered.append(path)
    for name in ("bin", "sbin", "lib", "lib64", "lib32"):
        host = f"/{name}"
        if os.path.islink(host) and not os.path.lexists(f"{root}{host}"):
            os.symlink(os.readlink(host), f"{root}{host}")
    os.makedirs(f"{root}/dev", exist_ok=True)
    for device in DEVICES:
        if os.path.exists(f"/dev/{device}"):
            open(f"{root}/dev/{device}", "a").close()
            _mount(f"/dev/{device}", f"{root}/dev/{device}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                         ("shm", "/tmp")):  # fmt: skip
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(f"{root}/proc")
    os.makedirs(f"{root}/tmp")
    _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_root(work_mb: int, work_inodes: int, root: str = "/tmp") -> bool:
    """Enter new mount, IPC and UTS namespaces and pivot into the template ``root``.

    The work dir is ``/tmp``, a fresh tmpfs of ``work_mb`` MiB and ``work_inodes`` inodes;
    it vanishes with the run's mount namespace. Must run as PID 1 of a new PID namespace
    (for ``/proc``). Returns whether ``/proc`` could be mounted (left out where the kernel
    refuses a fresh one).
    """
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)
    try:
        _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        has_proc = True
    except OSError:
        has_proc = False
    _mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={work_mb}m,nr_inodes={work_inodes},mode=700")  # fmt: skip
    os.chdir(root)
    _check(_libc.syscall(SYS["pivot_root"], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")
    return has_proc


def new_session_keyring() -> None:
    """Leave the caller's session keyring for a fresh, empty one."""
    keyctl_join_session_keyring = 1
    _check(_libc.syscall(SYS["keyctl"], keyctl_join_session_keyring, None), "keyctl")


def drop_capabilities() -> None:
    """Clear every capability (the runner holds them inside its user namespace)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(SYS["capset"], header, data), "capset")


# ----------------------------------------------------------------------------- Landlock

_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_FS_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (1 << 14) | (1 << 15)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel (0 when unavailable)."""
    result = _libc.syscall(
        SYS["landlock_create_ruleset"], None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
    return max(result, 0)


def apply_landlock(abi: int, writable: list[str], readable: list[str]) -> None:
    """Reads only below ``readable``, writes only below ``writable``; no TCP (ABI >= 4); no
    signals or abstract sockets to processes outside (ABI >= 6)."""
    handled_fs = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_READ_DIR
    handled_fs |= _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_ALL
    handled_fs |= (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled_fs, 0, 0)
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16
    ruleset = _check(
        _libc.syscall(SYS["landlock_create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    read_only = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    rules = [(path, read_only) for path in readable] + [(path, handled_fs) for path in writable]
    rules.append(("/dev/null", _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE))
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
                    _libc.syscall(SYS["landlock_add_rule"], ruleset, 1, ctypes.byref(rule), 0),
                    "landlock_add_rule",
                )
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_libc.syscall(SYS["landlock_restrict_self"], ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


# ----------------------------------------------------------------------------- seccomp

# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED_SYSCALLS = {
    # other processes' memory and kernel objects
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_getfd": 438, "add_key": 248, "request_key": 249, "keyctl": 250,
    # large attack surface, rarely needed
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 323, "bpf": 321, "perf_event_open": 298, "personality": 135,
    "fanotify_init": 300, "lookup_dcookie": 212, "syslog": 103,
    # mounts and namespaces (the sandbox is already set up)
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272,
    "setns": 308, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    # the machine itself
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
    "quotactl": 179, "quotactl_fd": 443, "vhangup": 153, "iopl": 172, "ioperm": 173,
    # ownership, extended attributes and device nodes
    "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "mknod": 133, "mknodat": 259,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
    "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466,
}  # fmt: skip
METADATA_SYSCALLS = {
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
    "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
}  # fmt: skip
"""Denied too where no read-only mount view protects files outside the work dir."""
_SYS_SOCKET, _SYS_CLONE, _SYS_CLONE3, _SYS_EXIT_GROUP = 41, 56, 435, 231
_SYS_SECCOMP, _SYS_PIDFD_GETFD = 317, 438
_AUDIT_ARCH_X86_64 = 0xC000003E
_NAMESPACE_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
_NAMESPACE_FLAGS |= CLONE_NEWNET | CLONE_NEWCGROUP
_RET_ALLOW, _RET_KILL, _RET_ERRNO, _RET_USER_NOTIF = 0x7FFF0000, 0x80000000, 0x00050000, 0x7FC00000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_supported() -> bool:
    """Whether :func:`seccomp_filter` knows this architecture's system call numbers."""
    return X86_64


def seccomp_filter(*, unix_sockets: bool, metadata: bool, exit_notices: bool = False) -> bytes:
    """A classic-BPF seccomp program (``struct sock_filter[]``) for x86_64.

    Denies (EPERM) :data:`DENIED_SYSCALLS`, the x32 ABI, ``clone`` with namespace flags
    and every ``socket()`` but ``AF_UNIX`` (none at all unless ``unix_sockets``);
    ``clone3`` answers ENOSYS so that libc falls back to the checked ``clone``; with
    ``metadata`` False also :data:`METADATA_SYSCALLS`. Any other architecture is killed.
    With ``exit_notices``, ``exit_group`` waits for the supervisor holding the filter's
    listener (:func:`receive_notice`), which learns the exit status before the kernel
    tears the process down; without a listener it fails and libc falls back to ``exit``.
    """
    denied = list(DENIED_SYSCALLS.values()) + ([] if metadata else list(METADATA_SYSCALLS.values()))
    # (code, jt label, jf label, k); labels are names resolved to relative offsets below.
    program: list[tuple[int, str | int, str | int, int]] = [
        (_LD_ABS, 0, 0, 4),
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _RET_KILL),
        (_LD_ABS, 0, 0, 0),
        (_JGE, "deny", 0, 0x40000000),
        *[(_JEQ, "deny", 0, number) for number in denied],
        (_JEQ, "socket", 0, _SYS_SOCKET),
        (_JEQ, "clone", 0, _SYS_CLONE),
        (_JEQ, "nosys", 0, _SYS_CLONE3),
        *([(_JEQ, "notify", 0, _SYS_EXIT_GROUP)] if exit_notices else []),
        (_RET, 0, 0, _RET_ALLOW),
    ]
    labels = {"socket": len(program)}
    program += [(_LD_ABS, 0, 0, 16), (_JEQ, 0, "deny", 1 if unix_sockets else 0xFFFF)]
    program.append((_RET, 0, 0, _RET_ALLOW))
    labels["clone"] = len(program)
    program += [(_LD_ABS, 0, 0, 16), (_JSET, "deny", 0, _NAMESPACE_FLAGS), (_RET, 0, 0, _RET_ALLOW)]
    labels["nosys"] = len(program)
    program.append((_RET, 0, 0, _RET_ERRNO | errno.ENOSYS))
    labels["notify"] = len(program)
    program.append((_RET, 0, 0, _RET_USER_NOTIF))
    labels["deny"] = len(program)
    program.append((_RET, 0, 0, _RET_ERRNO | errno.EPERM))
    encoded = b""
    for pc, (code, jt, jf, k) in enumerate(program):
        jt = labels[jt] - pc - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - pc - 1 if isinstance(jf, str) else jf
        encoded += struct.pack("=HBBI", code, jt, jf, k)
    return encoded


def apply_seccomp(program: bytes, *, listener: bool = False) -> int | None:
    """Install ``program`` for this process and every process it starts (irrevocable);
    with ``listener``, returns the fd of its user-notification listener."""

    class _SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prctl(PR_SET_NO_NEW_PRIVS, 1)
    fprog = _SockFprog(len(program) // 8, program)
    if listener:
        set_mode_filter, new_listener = 1, 1 << 3
        return _check(
            _libc.syscall(_SYS_SECCOMP, set_mode_filter, new_listener, ctypes.byref(fprog)),
            "seccomp",
        )
    seccomp_mode_filter = 2
    _check(_libc.prctl(PR_SET_SECCOMP, seccomp_mode_filter, ctypes.byref(fprog), 0, 0), "seccomp")
    return None


def pidfd_getfd(pidfd: int, target_fd: int) -> int:
    """A duplicate of the process's ``target_fd`` (needs ptrace rights over it)."""
    return _check(_libc.syscall(_SYS_PIDFD_GETFD, pidfd, target_fd, 0), "pidfd_getfd")


_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, seccomp_data
_NOTIF_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
_IOCTL_NOTIF_RECV = 0xC0000000 | _NOTIF.size << 16 | 0x2100
_IOCTL_NOTIF_SEND = 0xC0000000 | _NOTIF_RESP.size << 16 | 0x2101


def receive_notice(listener: int) -> tuple[int, int, int]:
    """The next notified system call (pid as seen here, number, first argument), which is
    let continue at once. Raises ``OSError`` if its process died meanwhile."""
    buffer = bytearray(_NOTIF.size)  # the kernel wants it zeroed
    fcntl.ioctl(listener, _IOCTL_NOTIF_RECV, buffer)
    notice_id, pid, _, number, _, _, first, *_ = _NOTIF.unpack(buffer)
    continue_flag = 1
    with contextlib.suppress(OSError):  # the process was killed while it waited
        fcntl.ioctl(listener, _IOCTL_NOTIF_SEND, _NOTIF_RESP.pack(notice_id, 0, 0, continue_flag))
    return pid, number, first


# ----------------------------------------------------------------------------- cgroups


class Cgroups:
    """A worker's memory and pids cgroups, with a child for its runs (v1 or v2 hierarchies).

    Created by the worker before it enters its user namespace (as root, or where the
    hierarchy was delegated to this user). A worker runs one run at a time, so the child
    holds only the current run's processes; it is reused by the next run (its OOM count
    is read before and after). :meth:`remove` removes every directory again. Controllers
    that cannot be set up are left out.
    """

    def __init__(self, name: str) -> None:
        self.dirs: dict[str, str] = {}
        for controller in ("memory", "pids"):
            parent = _controller_parent(controller)
            if parent is None:
                continue
            path = os.path.join(parent, name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            if _is_v2(path):
                with contextlib.suppress(OSError):
                    _write_file(os.path.join(path, "cgroup.subtree_control"), f"+{controller}")
                if controller not in _read_file(os.path.join(path, "cgroup.subtree_control")):
                    os.rmdir(path)
                    continue
            self.dirs[controller] = path

    def create_run(self, run: str, memory_mb: int, max_pids: int) -> dict[str, str]:
        """Directories of a new run's cgroups (limits set); the run joins with :func:`join`."""
        created: dict[str, str] = {}
        for controller, parent in self.dirs.items():
            path = os.path.join(parent, run)
            if path not in created.values():  # v2: one directory holds both controllers
                os.mkdir(path)
            created[controller] = path
        self.set_memory(created, memory_mb)
        if "pids" in created:
            _write_file(os.path.join(created["pids"], "pids.max"), str(max_pids))
        return created

    @staticmethod
    def set_memory(run: dict[str, str], memory_mb: int) -> None:
        if "memory" not in run:
            return
        path, limit = run["memory"], str(memory_mb << 20)
        if _is_v2(path):
            _write_file(os.path.join(path, "memory.max"), limit)
            with contextlib.suppress(OSError):
                _write_file(os.path.join(path, "memory.swap.max"), "0")
        else:
            _write_file(os.path.join(path, "memory.limit_in_bytes"), limit)

    @staticmethod
    def oom_kills(run: dict[str, str]) -> int:
        """How many processes the kernel has killed in this cgroup for exceeding its memory."""
        if "memory" not in run:
            return 0
        path = run["memory"]
        events = "memory.events" if _is_v2(path) else "memory.oom_control"
        for line in _read_file(os.path.join(path, events)).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    @staticmethod
    def pids(run: dict[str, str]) -> list[int]:
        """Processes in the run's cgroup (as seen from the caller's PID namespace)."""
        path = run.get("pids") or run.get("memory")
        text = _read_file(os.path.join(path, "cgroup.procs")) if path else ""
        return [int(pid) for pid in text.split()]

    def remove(self) -> None:
        """Remove the worker's cgroups and the runs' cgroup below them."""
        for path in dict.fromkeys(self.dirs.values()):
            for entry in os.scandir(path):
                if entry.is_dir():
                    remove_cgroup(entry.path)
            remove_cgroup(path)


def remove_cgroup(path: str, patience: float = 5.0) -> None:
    """``rmdir`` a cgroup, retrying while the kernel still counts exiting processes in it."""
    deadline = time.monotonic() + patience
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def join(run: dict[str, str]) -> None:
    """Move the calling process into the run's cgroups."""
    for path in dict.fromkeys(run.values()):
        _write_file(os.path.join(path, "cgroup.procs"), "0")


def _is_v2(path: str) -> bool:
    return os.path.exists(os.path.join(path, "cgroup.controllers"))


def _controller_parent(controller: str) -> str | None:
    """This process's cgroup directory in the hierarchy holding ``controller``."""
    for line in _read_file("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = f"/sys/fs/cgroup/{controller}{path}"
        elif controllers == "":
            root = "/sys/fs/cgroup"
            if controller not in _read_file(f"{root}/cgroup.controllers"):
                root = "/sys/fs/cgroup/unified"
            candidate = root + path
            if controller not in _read_file(os.path.join(candidate, "cgroup.controllers")):
                continue
        else:
            continue
        if os.access(candidate, os.W_OK):
            return candidate.rstrip("/")
    return None
