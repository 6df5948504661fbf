"""Cgroups of a sandbox worker: memory, pids and CPU limits per run, from cgroup v1 or v2.

Shipped with the worker (standard library only); the host imports :func:`remove_cgroup` to
clean up after a worker it killed. A worker's cgroup sits below this process's own cgroup
in each controller's hierarchy, with a child per run slot (``run-0``, ``run-1``); every run
slot gets the same CPU weight, so a run with 30 busy processes gets no more CPU than a run
with one.

* cgroup v1 (a hierarchy per controller): wherever this process may create a child (root).
* cgroup v2 (one hierarchy): only below a cgroup *delegated* to this process: the root of
  its cgroup namespace (a container), a cgroup marked delegated by systemd (``Delegate=``,
  the ``trusted.delegate`` / ``user.delegate`` attribute), or, for a user other than root,
  one whose ``cgroup.procs`` and ``cgroup.subtree_control`` it owns. Where the controllers
  are not yet enabled there and the cgroup holds processes, they move into its child
  ``leaf`` first (v2 allows processes only in leaves once controllers are enabled below;
  their limits do not change). A cgroup that is not delegated is never changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time

CONTROLLERS = ("memory", "pids", "cpu")
SHARED_V1 = ("cpu",)
"""Controllers a v1 worker holds for its runs as a whole (the spawner joins once), not per
run slot: one run at a time uses the CPU of a worker, and each v1 hierarchy a new runner
joins is one more migration under a kernel-wide lock."""
CPU_SHARES_V1 = 3 * 1024
"""The v1 CPU weight of a worker's runs: what its three processes a run keeps busy (worker,
spawner, runner) weighed as plain tasks, so that on a loaded host a sandbox gets the share
it had before its runs were grouped (each busy process beyond those adds nothing)."""
LEAF = "leaf"
"""Where the processes of a delegated v2 cgroup move so that controllers can be enabled."""


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _read_file(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


class Cgroups:
    """A worker's cgroups and its run slots; controllers that cannot be set up are left out.

    Created by the worker before it enters its user namespace. ``dirs`` maps each
    controller to the worker's directory (one directory for every v2 controller);
    ``version`` per controller says which hierarchy holds it. :meth:`remove` removes every
    directory it made again.
    """

    def __init__(self, name: str, controllers: tuple[str, ...] = CONTROLLERS) -> None:
        self.dirs: dict[str, str] = {}
        self.version: dict[str, int] = {}
        unified = [c for c in controllers if not self._set_up_v1(name, c)]
        if unified:
            self._set_up_v2(name, unified)

    def _set_up_v1(self, name: str, controller: str) -> bool:
        """A v1 hierarchy's child for ``controller``; False if no v1 hierarchy holds it."""
        own = own_cgroup(controller)
        if own is None:
            return False
        sweep_leftovers(own, name)
        path = os.path.join(own, name)
        with contextlib.suppress(OSError):
            os.mkdir(path)
            self.dirs[controller], self.version[controller] = path, 1
            if controller == "cpu":
                _write_file(os.path.join(path, "cpu.shares"), str(CPU_SHARES_V1))
        return True

    def _set_up_v2(self, name: str, controllers: list[str]) -> None:
        own = own_cgroup(None)
        if own is None:
            return
        usable = enable_below(own, controllers)
        if not usable:
            return
        sweep_leftovers(own, name)
        path = os.path.join(own, name)
        try:
            os.mkdir(path)
            for controller in usable:
                _write_file(os.path.join(path, "cgroup.subtree_control"), f"+{controller}")
        except OSError:
            remove_cgroup(path)
            return
        for controller in usable:
            self.dirs[controller], self.version[controller] = path, 2

    def shared(self) -> dict[str, str]:
        """The cgroups all runs of the worker share (v1 CPU); its spawner joins them."""
        return {c: p for c, p in self.dirs.items() if c in SHARED_V1 and self.version[c] == 1}

    def create_run(self, run: str, memory_mb: int, max_pids: int) -> dict[str, str]:
        """Directories of a new run slot's cgroups, limits set; a run joins with :func:`join`."""
        created: dict[str, str] = {}
        for controller, parent in self.dirs.items():
            if controller in self.shared():
                continue
            path = os.path.join(parent, run)
            if path not in created.values():  # v2: one directory holds every controller
                os.mkdir(path)
            created[controller] = path
        set_memory(created, memory_mb)
        if "pids" in created:
            _write_file(os.path.join(created["pids"], "pids.max"), str(max_pids))
        return created

    def remove(self) -> None:
        """Remove the worker's cgroups and the run slots below them."""
        for path in dict.fromkeys(self.dirs.values()):
            for entry in os.scandir(path):
                if entry.is_dir():
                    remove_cgroup(entry.path)
            remove_cgroup(path)


def set_memory(run: dict[str, str], memory_mb: int, patience: float = 2.0) -> None:
    """Set the run slot's memory limit, retrying while the kernel cannot reclaim down to it
    yet (``EBUSY``: pages of the slot's last run are still being freed)."""
    if "memory" not in run:
        return
    path, limit = run["memory"], str(memory_mb << 20)
    name = "memory.max" if _is_v2(path) else "memory.limit_in_bytes"
    deadline = time.monotonic() + patience
    while True:
        try:
            _write_file(os.path.join(path, name), limit)
            break
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    if _is_v2(path):
        with contextlib.suppress(OSError):
            _write_file(os.path.join(path, "memory.swap.max"), "0")


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


def pids(run: dict[str, str]) -> list[int]:
    """Processes in the run's cgroup (as seen from the caller's PID namespace)."""
    path = run.get("pids") or run.get("memory") or run.get("cpu")
    text = _read_file(os.path.join(path, "cgroup.procs")) if path else ""
    return [int(pid) for pid in text.split()]


def kill(run: dict[str, str]) -> bool:
    """Kill every process of the run at once (cgroup v2's ``cgroup.kill``); False where the
    kernel has no such file (v1, Linux < 5.14): the caller signals each process."""
    path = next((p for p in run.values() if _is_v2(p)), None)
    if path is None:
        return False
    try:
        _write_file(os.path.join(path, "cgroup.kill"), "1")
    except OSError:
        return False
    return True


def join(run: dict[str, str]) -> None:
    """Move the calling process into the run's cgroups."""
    for path in dict.fromkeys(run.values()):
        _write_file(os.path.join(path, "cgroup.procs"), "0")


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


def sweep_leftovers(parent: str, name: str) -> None:
    """Remove the empty cgroups that workers no longer alive left in ``parent`` (named like
    ``name``, ``<prefix>-<pid>``): a host and its workers killed at once clean up nothing.
    A cgroup that still holds a process, or whose pid is alive, stays."""
    prefix = name.rsplit("-", 1)[0] + "-"
    for entry in os.scandir(parent):
        pid = entry.name.removeprefix(prefix)
        if entry.name == pid or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        with contextlib.suppress(OSError):  # busy (processes left) or removed meanwhile
            for slot in os.scandir(entry.path):
                if slot.is_dir():
                    os.rmdir(slot.path)
            os.rmdir(entry.path)


def own_cgroup(controller: str | None) -> str | None:
    """This process's writable cgroup directory in the v1 hierarchy of ``controller``, or
    (``controller`` None) in the v2 hierarchy; None where there is none."""
    for line in _read_file("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if controller is None and controllers == "":
            mount = _mount_point("cgroup2")
        elif controller is not None and controller in controllers.split(","):
            mount = _mount_point("cgroup", controller)
        else:
            continue
        candidate = (mount + path).rstrip("/") if mount else None
        if candidate and os.access(candidate, os.W_OK):
            return candidate
    return None


def _mount_point(fstype: str, controller: str | None = None) -> str | None:
    """Where this mount namespace shows the root of a cgroup hierarchy (None if nowhere).

    Only mounts of the hierarchy's root count: /proc/self/cgroup paths are relative to it.
    """
    for line in _read_file("/proc/self/mountinfo").splitlines():
        fields = line.split()
        separator = fields.index("-")
        root, target, kind = fields[3], fields[4], fields[separator + 1]
        options = fields[separator + 3].split(",") if len(fields) > separator + 3 else []
        if kind == fstype and root == "/" and (controller is None or controller in options):
            return target.replace("\\040", " ")
    return None


def enable_below(cgroup: str, wanted: list[str]) -> list[str]:
    """The controllers of ``wanted`` that children of v2 ``cgroup`` can use, enabling them
    where ``cgroup`` is delegated to this process (moving its processes to ``leaf``)."""
    available = _read_file(os.path.join(cgroup, "cgroup.controllers")).split()
    wanted = [c for c in wanted if c in available]
    enabled = _read_file(os.path.join(cgroup, "cgroup.subtree_control")).split()
    missing = [c for c in wanted if c not in enabled]
    if missing and delegated(cgroup):
        for controller in missing:
            with contextlib.suppress(OSError):
                _enable(cgroup, controller)
        enabled = _read_file(os.path.join(cgroup, "cgroup.subtree_control")).split()
    return [c for c in wanted if c in enabled]


def _enable(cgroup: str, controller: str, attempts: int = 20) -> None:
    """Enable ``controller`` for the children of ``cgroup``; while the kernel refuses because
    ``cgroup`` holds processes (``EBUSY``), move them into its ``leaf`` child first."""
    control = os.path.join(cgroup, "cgroup.subtree_control")
    for _ in range(attempts):
        try:
            _write_file(control, f"+{controller}")
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
        leaf = os.path.join(cgroup, LEAF)
        with contextlib.suppress(FileExistsError):
            os.mkdir(leaf)
        for pid in _read_file(os.path.join(cgroup, "cgroup.procs")).split():
            with contextlib.suppress(OSError):  # exited meanwhile
                _write_file(os.path.join(leaf, "cgroup.procs"), pid)
    raise OSError(errno.EBUSY, f"cannot empty {cgroup} to enable {controller}")


def delegated(cgroup: str) -> bool:
    """Whether v2 ``cgroup`` is this process's to subdivide (see the module docstring)."""
    if os.path.realpath(cgroup) == os.path.realpath(own_cgroup_root() or ""):
        return True  # the root of this cgroup namespace: a container's, or the machine's
    for attribute in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(cgroup, attribute) == b"1":
                return True
    files = [os.path.join(cgroup, name) for name in ("cgroup.procs", "cgroup.subtree_control")]
    return os.geteuid() != 0 and all(os.stat(f).st_uid == os.geteuid() for f in files)


def own_cgroup_root() -> str | None:
    """The v2 mount point, when this process's v2 cgroup is the root of its namespace."""
    for line in _read_file("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            return _mount_point("cgroup2") if line[3:] == "/" else None
    return None


def _is_v2(path: str) -> bool:
    return os.path.exists(os.path.join(path, "cgroup.controllers"))
