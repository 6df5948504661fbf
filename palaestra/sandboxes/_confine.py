"""Kernel mechanisms that confine a sandboxed run, through system calls (standard library only).

Shipped with the sandbox worker (``palaestra/sandboxes/_worker.py``), never imported by the
host. Each function does one thing and raises ``OSError`` when the kernel refuses:

* namespaces: user + network (once per worker; as root, a user namespace that belongs to a
  dedicated unprivileged uid, :func:`enter_user_namespace`), then per run PID, IPC and UTS
  (and mount: the view of ``_view.py``);
* Landlock (read / write allow-lists, no TCP, no signals or abstract sockets outside);
* a seccomp BPF filter (:func:`seccomp_filter`) that denies the dangerous system calls;
* a fresh session keyring, no capabilities.

Cgroups are in ``_cgroups.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import stat
import struct

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x2000000  # fmt: skip
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
PR_SET_CHILD_SUBREAPER, PR_SET_SECCOMP, PR_CAPBSET_DROP = 36, 22, 24
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


# ----------------------------------------------------------------------------- namespaces


SANDBOX_UID = 1000
"""The uid and gid of sandboxed code in its user namespace (user ``sandbox`` in the view)."""
HOSTNAME = b"sandbox"


def enter_user_namespace(dedicated_uid: int | None) -> bool:
    """Own user and network namespaces (no interfaces up: no network at all).

    As root (``dedicated_uid`` given) the namespace maps root to root (the worker and its
    spawner) and :data:`SANDBOX_UID` to ``dedicated_uid`` (the runs), and belongs to
    ``dedicated_uid`` where the kernel lets that uid create one: every per-user kernel budget
    the runs use (processes, inotify instances, ...) is then that uid's, never root's.
    Otherwise the caller's uid maps to :data:`SANDBOX_UID`. Returns whether the namespace
    belongs to ``dedicated_uid``.
    """
    if dedicated_uid is None:
        uid, gid = os.geteuid(), os.getegid()
        unshare(CLONE_NEWUSER | CLONE_NEWNET)
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{SANDBOX_UID} {uid} 1")
        _write_file("/proc/self/gid_map", f"{SANDBOX_UID} {gid} 1")
        return False
    maps = f"0 0 1\n{SANDBOX_UID} {dedicated_uid} 1\n"
    if _join_namespaces_of(dedicated_uid, maps):
        return True
    _unshare_with_maps(maps)
    return False


def _join_namespaces_of(uid: int, maps: str) -> bool:
    """A child as ``uid`` creates user and network namespaces; this (root) process writes
    their id maps and joins them. False where ``uid`` may not create a user namespace."""
    (ready_r, ready_w), (done_r, done_w) = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        created = b"0"
        with contextlib.suppress(BaseException):
            os.close(ready_r)
            os.close(done_w)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            unshare(CLONE_NEWUSER | CLONE_NEWNET)
            created = b"1"
        with contextlib.suppress(BaseException):
            os.write(ready_w, created)
            os.read(done_r, 1)  # keeps the namespaces alive until they are joined
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            return False
        for name in ("uid_map", "gid_map"):
            _write_file(f"/proc/{pid}/{name}", maps)
        fds = [os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY) for kind in ("user", "net")]
        try:
            setns(fds[0], CLONE_NEWUSER)  # opened first: the helper is not dumpable for us then
            setns(fds[1], CLONE_NEWNET)
        finally:
            for fd in fds:
                os.close(fd)
        return True
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(pid, 0)


def _unshare_with_maps(maps: str) -> None:
    """Create the namespaces as root; a child still outside them writes the id maps."""
    parent = os.getpid()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        with contextlib.suppress(BaseException):
            os.close(go_w)
            if os.read(go_r, 1) == b"1":
                for name in ("uid_map", "gid_map"):
                    _write_file(f"/proc/{parent}/{name}", maps)
                code = 0
        os._exit(code)
    os.close(go_r)
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNET)
        os.write(go_w, b"1")
    finally:
        os.close(go_w)
        written = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    if not written:
        raise OSError("cannot write the id maps of the sandbox's user namespace")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
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


def make_read_only(path: str) -> None:
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
        mount(None, path, None, flags)


def pivot_into_cwd() -> None:
    """Make the current directory the root of this mount namespace, the old root unmounted."""
    _check(_libc.syscall(SYS["pivot_root"], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")


def new_host_identity() -> None:
    """New IPC and UTS namespaces: no SysV IPC object of the host or of other runs in
    sight, and the neutral host name ``sandbox``."""
    unshare(CLONE_NEWIPC | CLONE_NEWUTS)
    _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")


def new_session_keyring() -> None:
    """Leave the caller's session keyring for a fresh, empty one."""
    keyctl_join_session_keyring = 1
    _check(_libc.syscall(SYS["keyctl"], keyctl_join_session_keyring, None), "keyctl")


def drop_capabilities() -> None:
    """Clear every capability: the bounding set (where this process may), then the
    effective, permitted and inheritable sets (inside a user namespace the runner holds
    them all; without one a run that stays root would hold the host's). With
    ``no_new_privs`` set, no ``execve`` gives any back."""
    for capability in range(64):
        with contextlib.suppress(OSError):
            prctl(PR_CAPBSET_DROP, capability)
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


_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR


def landlock_read_ruleset(readable: list[str], listable: list[str]) -> int:
    """A Landlock ruleset (its fd) that handles reads only: files below ``readable``,
    listing the directories below ``listable``. Built once (a worker without a mount
    namespace lists hundreds of site-packages entries), then given to
    :func:`apply_landlock`."""
    ruleset = _create_ruleset(_RulesetAttr(_FS_READ, 0, 0), 16)
    try:
        rules = [(path, _FS_READ) for path in readable] + [(p, _FS_READ_DIR) for p in listable]
        _add_rules(ruleset, [*rules, ("/dev/null", _FS_READ_FILE)], _FS_READ)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def apply_landlock(abi: int, writable: list[str], read_ruleset: int) -> None:
    """Reads as ``read_ruleset`` allows (:func:`landlock_read_ruleset`; closed here), writes
    and changes only below ``writable``; no TCP (ABI >= 4); no signals or abstract sockets
    to processes outside (ABI >= 6)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    try:
        _check(_libc.syscall(SYS["landlock_restrict_self"], read_ruleset, 0), "landlock reads")
    finally:
        os.close(read_ruleset)
    handled = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_ALL
    handled |= (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, 0, 0)
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    ruleset = _create_ruleset(attr, ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16)
    try:
        rules = [(path, handled) for path in writable]
        _add_rules(ruleset, [*rules, ("/dev/null", _FS_WRITE_FILE | _FS_TRUNCATE)], handled)
        _check(_libc.syscall(SYS["landlock_restrict_self"], ruleset, 0), "landlock writes")
    finally:
        os.close(ruleset)


def _create_ruleset(attr: _RulesetAttr, size: int) -> int:
    return _check(
        _libc.syscall(SYS["landlock_create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )


def _add_rules(ruleset: int, rules: list[tuple[str, int]], handled: int) -> None:
    """Allow each rule's access below its path (paths that do not exist are left out)."""
    for path, access in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= _FS_FILE_ONLY
            rule = _PathBeneathAttr(access & handled, fd)
            _check(
                _libc.syscall(SYS["landlock_add_rule"], ruleset, 1, ctypes.byref(rule), 0),
                "landlock_add_rule",
            )
        finally:
            os.close(fd)


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
    # the host's clock and names
    "adjtimex": 159, "clock_adjtime": 305, "settimeofday": 164, "clock_settime": 227,
    "sethostname": 170, "setdomainname": 171,
    # other processes by pidfd (their memory, their reclaim)
    "process_madvise": 440, "process_mrelease": 448,
}  # fmt: skip
METADATA_SYSCALLS = {
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
    "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
}  # fmt: skip
"""Denied too where no read-only mount view protects files outside the work dir."""
IPC_SYSCALLS = {
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
    "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
    "mq_notify": 244, "mq_getsetattr": 245,
}  # fmt: skip
"""System V IPC and POSIX message queues: denied too where the code shares the host's IPC
namespace (their objects would outlive the run and reach the host's)."""
WATCH_SYSCALLS = {"inotify_add_watch": 254}
"""Denied too where no mount view hides the host's files: Landlock does not check watches,
which would report the names and sizes of files in any directory."""
OWN_PROCESS_SYSCALLS = {
    "prlimit64": 302, "getpriority": 140, "setpriority": 141, "sched_setparam": 142,
    "sched_getparam": 143, "sched_setscheduler": 144, "sched_getscheduler": 145,
    "sched_rr_get_interval": 148, "sched_setaffinity": 203, "sched_getaffinity": 204,
    "sched_setattr": 314, "sched_getattr": 315, "migrate_pages": 256, "move_pages": 279,
    "getpgid": 121, "getsid": 124, "get_robust_list": 274,
}  # fmt: skip
"""Calls that name a process by its pid (first argument): where the run shares the host's
PID namespace, allowed for the caller only (pid 0), so that no host process can be
reniced, re-pinned, limited, or found. ``setpriority``/``getpriority`` and ``ioprio_*``
take (which, who): only (the process, 0)."""
_PRIORITY_SYSCALLS = {140: 0, 141: 0, 251: 1, 252: 1}  # number -> "which" of the caller
_SYS_PIDFD_OPEN, _SYS_FADVISE64, _SYS_MADVISE = 434, 221, 28
_FADV_DONTNEED, _MADV_COLD, _MADV_PAGEOUT = 4, 20, 21
_SYS_SOCKET, _SYS_CLONE, _SYS_CLONE3, _SYS_EXIT_GROUP = 41, 56, 435, 231
_SYS_SECCOMP, _SYS_PIDFD_GETFD = 317, 438
_AUDIT_ARCH_X86_64 = 0xC000003E
_NAMESPACE_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
_NAMESPACE_FLAGS |= CLONE_NEWNET | CLONE_NEWCGROUP
_RET_ALLOW, _RET_KILL, _RET_ERRNO, _RET_USER_NOTIF = 0x7FFF0000, 0x80000000, 0x00050000, 0x7FC00000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_Instruction = tuple[int, str | int, str | int, int]
"""(code, jump if true, jump if false, k); a jump is a label's name or a relative offset."""


def seccomp_supported() -> bool:
    """Whether :func:`seccomp_filter` knows this architecture's system call numbers."""
    return X86_64


def seccomp_filter(
    *,
    unix_sockets: bool,
    metadata: bool,
    host_ipc: bool = False,
    host_pids: bool = False,
    exit_notices: bool = False,
) -> bytes:
    """A classic-BPF seccomp program (``struct sock_filter[]``) for x86_64.

    Denies (EPERM) :data:`DENIED_SYSCALLS`, the x32 ABI, ``clone`` with namespace flags
    and every ``socket()`` but ``AF_UNIX`` (none at all unless ``unix_sockets``);
    ``clone3`` answers ENOSYS so that libc falls back to the checked ``clone``;
    ``posix_fadvise(DONTNEED)`` and ``madvise(COLD | PAGEOUT)`` succeed without evicting
    anything (the view's files are the host's page cache). With ``metadata`` False also
    :data:`METADATA_SYSCALLS` and :data:`WATCH_SYSCALLS`, with ``host_ipc`` (no IPC
    namespace) :data:`IPC_SYSCALLS`, with ``host_pids`` (no PID namespace) ``pidfd_open``
    and :data:`OWN_PROCESS_SYSCALLS` on any process but the caller. Any other architecture
    is killed. With ``exit_notices``, ``exit_group`` waits for the supervisor holding the
    filter's listener (:func:`receive_notice`), which learns the exit status before the
    kernel tears the process down; without a listener it fails and libc falls back to
    ``exit``.
    """
    denied = list(DENIED_SYSCALLS.values())
    denied += [] if metadata else [*METADATA_SYSCALLS.values(), *WATCH_SYSCALLS.values()]
    denied += list(IPC_SYSCALLS.values()) if host_ipc else []
    denied += [_SYS_PIDFD_OPEN] if host_pids else []
    checked = {_SYS_SOCKET: "socket", _SYS_CLONE: "clone", _SYS_CLONE3: "nosys"}
    checked |= {_SYS_FADVISE64: "fadvise", _SYS_MADVISE: "madvise"}
    if host_pids:
        checked |= {number: "pid0" for number in OWN_PROCESS_SYSCALLS.values()}
        checked |= {
            n: ("ioprio" if which else "process") for n, which in _PRIORITY_SYSCALLS.items()
        }
    if exit_notices:
        checked[_SYS_EXIT_GROUP] = "notify"
    program: list[_Instruction] = [
        (_LD_ABS, 0, 0, 4),
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _RET_KILL),
        (_LD_ABS, 0, 0, 0),
        (_JGE, "deny", 0, 0x40000000),
        *[(_JEQ, "deny", 0, number) for number in denied],
        *[(_JEQ, label, 0, number) for number, label in checked.items()],
        (_RET, 0, 0, _RET_ALLOW),
    ]
    return _assemble(program, _argument_checks(unix_sockets))


def _argument_checks(unix_sockets: bool) -> dict[str, list[_Instruction]]:
    """The labelled blocks of :func:`seccomp_filter` that look at a call's arguments
    (``seccomp_data.args[i]`` is at offset 16 + 8 i; its low word is what an ``int``
    argument is) and the returns they jump to."""

    def caller_only(which: int) -> list[_Instruction]:  # (which, who) == (which, 0)
        return [
            (_LD_ABS, 0, 0, 16),
            (_JEQ, 0, "deny", which),
            (_LD_ABS, 0, 0, 24),
            (_JEQ, "allow", "deny", 0),
        ]

    return {
        "socket": [(_LD_ABS, 0, 0, 16), (_JEQ, "allow", "deny", 1 if unix_sockets else 0xFFFF)],
        "clone": [(_LD_ABS, 0, 0, 16), (_JSET, "deny", "allow", _NAMESPACE_FLAGS)],
        "fadvise": [(_LD_ABS, 0, 0, 40), (_JEQ, "pretend", "allow", _FADV_DONTNEED)],
        "madvise": [
            (_LD_ABS, 0, 0, 32),
            (_JEQ, "pretend", 0, _MADV_COLD),
            (_JEQ, "pretend", "allow", _MADV_PAGEOUT),
        ],
        "pid0": [(_LD_ABS, 0, 0, 16), (_JEQ, "allow", "deny", 0)],
        "process": caller_only(0),
        "ioprio": caller_only(1),
        "nosys": [(_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)],
        "notify": [(_RET, 0, 0, _RET_USER_NOTIF)],
        "pretend": [(_RET, 0, 0, _RET_ERRNO)],  # errno 0: the call returns 0 without running
        "allow": [(_RET, 0, 0, _RET_ALLOW)],
        "deny": [(_RET, 0, 0, _RET_ERRNO | errno.EPERM)],
    }


def _assemble(program: list[_Instruction], blocks: dict[str, list[_Instruction]]) -> bytes:
    """Append the labelled ``blocks``, resolve labels to relative jumps, encode."""
    labels: dict[str, int] = {}
    for label, block in blocks.items():
        labels[label] = len(program)
        program = [*program, *block]
    encoded = b""
    for pc, (code, jt, jf, k) in enumerate(program):
        jt = labels[jt] - pc - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - pc - 1 if isinstance(jf, str) else jf
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError(f"seccomp program too long for a jump at {pc}")
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
