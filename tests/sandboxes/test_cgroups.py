"""cgroup v2 delegation on the real kernel: a container's cgroup namespace, systemd's mark.

A child process enters a cgroup namespace rooted at a fresh cgroup and mounts cgroup2 at
``/sys/fs/cgroup`` in a private mount namespace: what a container sees. There the worker's
cgroups (``palaestra/sandboxes/_cgroups.py``) must move the container's processes into a
leaf, enable the controllers and create the run slots; a cgroup that is not delegated must
stay untouched until it carries systemd's ``trusted.delegate`` mark. The controller used is
one the machine has free for cgroup v2 (memory, pids and cpu where the host is v2; on a
host that keeps them in v1 hierarchies, hugetlb), so the per-run limits themselves are
covered by the rest of the suite on cgroup v1, or on a cgroup v2 machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.sandboxes import _cgroups
from tests.conftest import child_env

CONTAINER = r"""
import ctypes, json, os, subprocess, sys, time
from palaestra.sandboxes import _cgroups
libc = ctypes.CDLL(None, use_errno=True)
CONTROLLER, TEST_CGROUP = sys.argv[1], sys.argv[2]
open(os.path.join(TEST_CGROUP, "cgroup.procs"), "w").write("0")
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
other = subprocess.Popen(["sleep", "60"], **quiet)  # another process of the "container"
assert libc.unshare(0x02000000 | 0x00020000) == 0  # CLONE_NEWCGROUP | CLONE_NEWNS
assert libc.mount(None, b"/", None, 16384 | (1 << 18), None) == 0  # MS_REC | MS_PRIVATE
libc.umount2(b"/sys/fs/cgroup", 2)  # MNT_DETACH: cgroup2 may be there already (a v2 host)
assert libc.mount(b"cgroup2", b"/sys/fs/cgroup", b"cgroup2", 0, None) == 0
root = "/sys/fs/cgroup"
read = lambda *p: open(os.path.join(root, *p)).read().split()
found = {"own_cgroup": open("/proc/self/cgroup").read().strip().splitlines()[-1]}
worker = _cgroups.Cgroups("palaestra-sandbox-test", controllers=(CONTROLLER,))
runs = worker.create_run("run-0", 256, 8)
found.update(version=worker.version, leaf=sorted(map(int, read("leaf", "cgroup.procs"))),
             pids=sorted([os.getpid(), other.pid]), enabled=read("cgroup.subtree_control"),
             run_files=sorted(os.listdir(runs[CONTROLLER])))
worker.remove()
found["removed"] = not os.path.exists(os.path.join(root, "palaestra-sandbox-test"))
# A cgroup nobody delegated: left alone, processes and all, until systemd's mark says so.
os.mkdir(os.path.join(root, "service"))
mover = subprocess.Popen(["sh", "-c", f"echo $$ > {root}/service/cgroup.procs; exec sleep 60"], **quiet)
while not read("service", "cgroup.procs"):
    time.sleep(0.01)
found["undelegated"] = _cgroups.enable_below(os.path.join(root, "service"), [CONTROLLER])
found["untouched"] = read("service", "cgroup.subtree_control") == [] and not os.path.exists(
    os.path.join(root, "service", "leaf"))
os.setxattr(os.path.join(root, "service"), "trusted.delegate", b"1")
found["delegated"] = _cgroups.enable_below(os.path.join(root, "service"), [CONTROLLER])
found["moved"] = read("service", "leaf", "cgroup.procs") == [str(mover.pid)]
for process in (other, mover):
    process.kill()
    process.wait()
print(json.dumps(found))
"""


def _controller_for_the_test(own: str) -> tuple[str, bool] | None:
    """A controller children of ``own`` can get, and whether it must be enabled first (only
    at the root of the hierarchy, which may hold processes)."""
    available = Path(own, "cgroup.controllers").read_text().split()
    enabled = Path(own, "cgroup.subtree_control").read_text().split()
    for controller in ("memory", "pids", "cpu", "hugetlb", "io", "rdma", "misc"):
        if controller in enabled:
            return controller, False
    is_root = not Path(own, "cgroup.type").exists()  # the root cgroup has no type file
    for controller in available if is_root else ():
        return controller, True
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="making cgroup namespaces and mounts needs root")
def test_a_containers_cgroup_is_delegated_and_an_unmarked_one_is_not() -> None:
    own = _cgroups.own_cgroup(None)
    choice = _controller_for_the_test(own) if own else None
    if choice is None:
        pytest.skip("no cgroup v2 controller this process can give to a child cgroup")
    controller, enable = choice
    control = Path(own, "cgroup.subtree_control")
    if enable:
        control.write_text(f"+{controller}")
    test_cgroup = Path(own, f"palaestra-test-{os.getpid()}")
    test_cgroup.mkdir()
    try:
        env = child_env()
        done = subprocess.run(
            [sys.executable, "-c", CONTAINER, controller, str(test_cgroup)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    finally:
        folders = sorted(
            (p for p in test_cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
        )
        for folder in [*folders, test_cgroup]:  # a failed run may have left its sleepers
            for pid in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _cgroups.remove_cgroup(str(folder))
        if enable:
            control.write_text(f"-{controller}")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["own_cgroup"] == "0::/"  # the container's view: the root of its namespace
    assert found["version"] == {controller: 2}
    assert found["leaf"] == found["pids"]  # the container's processes moved into the leaf
    assert controller in found["enabled"] and found["removed"]
    assert any(name.startswith(f"{controller}.") for name in found["run_files"])
    assert found["undelegated"] == [] and found["untouched"]
    assert found["delegated"] == [controller] and found["moved"]
