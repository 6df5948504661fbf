"""What a run can read: a minimal read-only view of the system and the Python installation.

Shipped with the worker (standard library only). :func:`readable_paths` lists what sandboxed
code needs (system libraries, the interpreter, its standard library and site-packages),
wherever the interpreter lives (a venv under ``/tmp``, pyenv in a ``0700`` home, conda, a
system prefix); :func:`hidden_paths` lists what it must not read inside that: the packages
envs generate tasks and grade from (``_sources.py``) and files that name host paths. With a mount namespace,
:func:`build_template_root` (once per worker) and :func:`enter_root` (per run) make the view
the run's root: read-only binds at the same paths (their parent directories are the view's
own, so a ``0700`` home on the way does not matter), the hidden paths covered by empty ones,
neutral ``/etc/passwd``, ``/etc/group`` and ``/etc/hosts`` (user ``sandbox``, uid 1000), a
fresh ``/proc`` (its boot id and machine-wide counters empty), a few device nodes, and a size- and inode-limited tmpfs as ``/tmp``, the
work dir. Without one, Landlock allows reads of the same paths (``palaestra/sandboxes/
_confine.py``).
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig

import _confine as confine

SYSTEM_READABLE = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ssl/certs",
    "/etc/ca-certificates", "/etc/pki/tls/certs", "/etc/pki/ca-trust", "/etc/localtime",
    "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/mime.types", "/etc/os-release",
)  # fmt: skip
EDITABLE_POINTERS = ("__editable__", "_editable_impl_")
"""Prefixes of the files that point an editable install at its checkout (a host path)."""
SANDBOX_UID = confine.SANDBOX_UID
ETC_FILES = {
    "passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/tmp:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tsandbox\n",
}
DEVICES = ("null", "zero", "full", "random", "urandom")
PROC_MASKED = ("sys/kernel/random/boot_id", "stat", "loadavg")
"""Files of a run's fresh ``/proc`` that describe the machine rather than the run (which boot
this is; every CPU's time and how many processes of other runs are running): empty."""


def python_paths() -> list[str]:
    """This interpreter's installation: its prefixes, standard library and site-packages.

    Never other ``sys.path`` entries such as an editable checkout or the current directory.
    """
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += site.getsitepackages()
    return _existing(paths)


def readable_paths(extra: list[str]) -> list[str]:
    """What sandboxed code may read: system libraries, this Python's installation, ``extra``."""
    return _existing([*SYSTEM_READABLE, *python_paths(), *extra])


def _existing(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.exists(p)))


def hidden_paths(extra: list[str], task_sources: list[str]) -> list[str]:
    """Entries of site-packages that no run may read, and ``extra``: the packages, modules
    and metadata named in ``task_sources`` (``_sources.task_source_entries()``: what envs
    generate tasks and grade from), editable-install pointers, and each package's
    ``direct_url.json`` (the path or URL it was installed from)."""
    hidden = []
    sources = set(task_sources)
    site_dirs = _existing([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    for folder in _existing([*site_dirs, *site.getsitepackages()]):
        for entry in os.scandir(folder):
            if _hidden_entry(entry.name, sources):
                hidden.append(entry.path)
            elif os.path.exists(origin := os.path.join(entry.path, "direct_url.json")):
                hidden.append(origin)
    return _existing([*hidden, *extra])


def _hidden_entry(name: str, task_sources: set[str]) -> bool:
    module = name.split(".", 1)[
        0
    ]  # a single-file module or an extension: name.py, name.cpython-*.so
    return (
        name in task_sources
        or module in task_sources
        or name.startswith(EDITABLE_POINTERS)
        or name.endswith(".egg-link")
    )


def inside_work(readable: list[str], work: str = "/tmp") -> list[str]:
    """The readable paths under the work dir's mount point, each bound again per run."""
    inside = sorted(p for p in readable if p.startswith(work + "/"))
    return [p for p in inside if not any(p.startswith(q + "/") for q in inside)]


def python_readable() -> bool:
    """Whether the calling process can read this Python installation (its directories, the
    standard library's ``os.py``, the interpreter)."""
    stdlib = os.path.join(sysconfig.get_path("stdlib"), "os.py")
    folders = all(os.access(p, os.R_OK | os.X_OK) for p in python_paths())
    return folders and os.access(stdlib, os.R_OK) and os.access(sys.executable, os.X_OK)


def build_template_root(readable: list[str], hidden: list[str], root: str = "/tmp") -> None:
    """Enter a private mount namespace holding, at ``root``, the read-only root of every run.

    Called once per worker: a tmpfs with read-only binds of ``readable``, empty ones over
    ``hidden``, the neutral ``/etc`` files, the host's top-level symlinks (``/bin`` ->
    ``usr/bin``), a few device nodes and empty ``/proc`` and ``/tmp`` for
    :func:`enter_root`. ``root`` is hidden from the worker itself.
    """
    confine.unshare(confine.CLONE_NEWNS)
    confine.mount(None, "/", None, confine.MS_REC | confine.MS_PRIVATE)
    # Paths under ``root`` vanish below the template's tmpfs: reach them through descriptors.
    below = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in inside_work(readable, root)}
    flags = confine.MS_NOSUID | confine.MS_NODEV
    confine.mount("tmpfs", root, "tmpfs", flags, "size=4m,nr_inodes=4096,mode=755")
    covered: list[str] = []
    for path in sorted(readable, key=len):
        if not any(path == done or path.startswith(done + "/") for done in covered):
            source = f"/proc/self/fd/{below[path]}" if path in below else path
            _bind(source, root + path)
            covered.append(path)
    for fd in below.values():
        os.close(fd)
    for path in hidden:
        _cover(root + path)
    _write_etc(root)
    for name in ("bin", "sbin", "lib", "lib64", "lib32"):
        host = f"/{name}"
        if os.path.islink(host) and not os.path.lexists(f"{root}{host}"):
            os.symlink(os.readlink(host), f"{root}{host}")
    _add_devices(root)
    os.makedirs(f"{root}/proc")
    os.makedirs(f"{root}/tmp", exist_ok=True)
    confine.mount(
        None, root, None, confine.MS_REMOUNT | confine.MS_BIND | confine.MS_RDONLY | flags
    )


def _bind(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    confine.mount(source, target, None, confine.MS_BIND | confine.MS_REC)
    confine.make_read_only(target)


def _cover(target: str) -> None:
    """Mount an empty read-only directory (or ``/dev/null``) over ``target``."""
    if os.path.isdir(target):
        flags = confine.MS_RDONLY | confine.MS_NOSUID | confine.MS_NODEV | confine.MS_NOEXEC
        confine.mount("tmpfs", target, "tmpfs", flags, "size=4k,nr_inodes=1,mode=555")
    elif os.path.exists(target):
        confine.mount("/dev/null", target, None, confine.MS_BIND)


def _write_etc(root: str) -> None:
    os.makedirs(f"{root}/etc", exist_ok=True)
    for name, text in ETC_FILES.items():
        with open(f"{root}/etc/{name}", "w") as handle:
            handle.write(text)
        os.chmod(f"{root}/etc/{name}", 0o644)


def _add_devices(root: str) -> None:
    os.makedirs(f"{root}/dev", exist_ok=True)
    for device in DEVICES:
        if os.path.exists(f"/dev/{device}"):
            open(f"{root}/dev/{device}", "a").close()
            confine.mount(f"/dev/{device}", f"{root}/dev/{device}", None, confine.MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                         ("shm", "/tmp")):  # fmt: skip
        os.symlink(target, f"{root}/dev/{name}")


def enter_root(
    work_mb: int, work_inodes: int, *, owner: int, inside_work: list[str], root: str = "/tmp"
) -> None:
    """Enter a new mount namespace and pivot into the template ``root``.

    The work dir is ``/tmp``, a fresh tmpfs of ``work_mb`` MiB and ``work_inodes`` inodes
    owned by uid ``owner``; it vanishes with the run's mount namespace. ``inside_work``
    are readable paths under ``/tmp`` (a venv in a temporary directory): the template's
    binds of them are bound again inside the work dir, at the same paths, read-only. Must
    run as PID 1 of a new PID namespace (for ``/proc``, left out where the kernel refuses a
    fresh one).
    """
    confine.unshare(confine.CLONE_NEWNS)
    with contextlib.suppress(OSError):
        proc_flags = confine.MS_NOSUID | confine.MS_NODEV | confine.MS_NOEXEC
        confine.mount("proc", f"{root}/proc", "proc", proc_flags)
        for name in PROC_MASKED:
            confine.mount(f"{root}/dev/null", f"{root}/proc/{name}", None, confine.MS_BIND)
    kept = [os.open(root + path, os.O_PATH | os.O_CLOEXEC) for path in inside_work]
    options = f"size={work_mb}m,nr_inodes={work_inodes},mode=700,uid={owner},gid={owner}"
    confine.mount("tmpfs", f"{root}/tmp", "tmpfs", confine.MS_NOSUID | confine.MS_NODEV, options)
    for fd, path in zip(kept, inside_work, strict=True):
        os.makedirs(root + path, mode=0o755)
        confine.mount(f"/proc/self/fd/{fd}", root + path, None, confine.MS_BIND | confine.MS_REC)
        os.close(fd)
    os.chdir(root)
    confine.pivot_into_cwd()
    os.chdir("/")


def landlock_rules(readable: list[str], hidden: list[str]) -> tuple[list[str], list[str]]:
    """Landlock's form of the view (no mount namespace): (readable paths, directories that
    may only be listed). A readable directory above a hidden path is split into its entries,
    down to the hidden one."""
    readable_out: list[str] = []
    listable: list[str] = []

    def add(path: str) -> None:
        if path in hidden:
            return
        if not any(h.startswith(path + "/") for h in hidden):
            readable_out.append(path)
            return
        listable.append(path)
        for entry in os.scandir(path):
            add(entry.path)

    for path in sorted(readable, key=len):
        if path not in listable and not any(path.startswith(d + "/") for d in readable_out):
            add(path)
    return readable_out, listable
