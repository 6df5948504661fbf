"""Nothing a run does acts on the host outside it: other processes, the page cache, file
watches, the clock and host name, machine-wide counters.

Each test runs at every isolation level (``any_sandbox``) and either shows the class is
contained or, where ``isolation_report()`` names the protection missing, skips with it.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from palaestra.sandboxes import LocalSandbox
from tests.conftest import CHECKOUT

_libc = ctypes.CDLL(None, use_errno=True)

CAPABILITIES = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "header, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()\n"
    "libc.syscall(125, header, data)\n"  # capget
    "print(hex(sum(data[i] << 32 * (i // 3) for i in range(6))))\n"
)
ACT_ON = (
    "import os, resource, signal\n"
    "for name, act in [\n"
    "    ('renice', lambda: os.setpriority(os.PRIO_PROCESS, VICTIM, 15)),\n"
    "    ('renice-user', lambda: os.setpriority(os.PRIO_USER, 0, 15)),\n"
    "    ('pin', lambda: os.sched_setaffinity(VICTIM, {0})),\n"
    "    ('limit', lambda: resource.prlimit(VICTIM, resource.RLIMIT_NOFILE, (5, 5))),\n"
    "    ('find', lambda: resource.prlimit(VICTIM, resource.RLIMIT_NOFILE)),\n"
    "    ('find-priority', lambda: os.getpriority(os.PRIO_PROCESS, VICTIM)),\n"
    "    ('pidfd', lambda: os.pidfd_open(VICTIM)),\n"
    "    ('kill', lambda: os.kill(VICTIM, signal.SIGKILL)),\n"
    "]:\n"
    "    try:\n"
    "        act()\n"
    "        print(name, 'done')\n"
    "    except OSError as exc:\n"
    "        print(name, 'refused', exc.errno)\n"
    "os.nice(1)\n"  # the run's own priority, limits and CPUs stay its to change
    "os.sched_setaffinity(0, os.sched_getaffinity(0))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "print('own', os.getpriority(os.PRIO_PROCESS, 0))\n"
)


@pytest.fixture
def victim() -> Iterator[subprocess.Popen]:
    """A host process of this uid, outside every sandbox."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def _state(pid: int) -> tuple:
    limits = Path(f"/proc/{pid}/limits").read_text()
    return os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid), limits


def test_runs_hold_no_capabilities(any_sandbox: LocalSandbox) -> None:
    result = any_sandbox.run(CAPABILITIES)
    assert result.stdout == "0x0\n", result
    assert any_sandbox.isolation_report()["capabilities"] == "dropped"


def test_host_processes_cannot_be_acted_on(any_sandbox: LocalSandbox, victim) -> None:
    report = any_sandbox.isolation_report()
    if report["process_control"] is None or report["signals"] is None:
        assert {"process_control", "signals"} & set(report["missing"])
        pytest.skip("process_control / signals: reported missing at this isolation level")
    before = _state(victim.pid)
    result = any_sandbox.run(f"VICTIM = {victim.pid}\n" + ACT_ON)
    outcome = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert int(outcome.pop("own")) >= 1, result
    if report["process_control"] == "pid-namespace":  # every process of the uid is the run's
        outcome.pop("renice-user")
    assert not [name for name, said in outcome.items() if not said.startswith("refused")], result
    # Not found and not allowed look the same: no host pid can be discovered this way.
    assert len({said for name, said in outcome.items() if name != "kill"}) == 1, result
    assert victim.poll() is None and _state(victim.pid) == before


def test_the_clock_and_host_name_cannot_change(any_sandbox: LocalSandbox) -> None:
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "timex = ctypes.create_string_buffer(208)\n"
        "ctypes.c_uint.from_buffer(timex).value = 0x0001\n"  # ADJ_OFFSET
        "for name, args in {'adjtimex': (159, timex), 'sethostname': (170, b'pwned', 5),\n"
        "                   'settimeofday': (164, None, None)}.items():\n"
        "    print(name, libc.syscall(*args), ctypes.get_errno())\n"
    )
    result = any_sandbox.run(code)
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.endswith(" -1 1") for line in lines), result


def _resident_pages(path: str) -> int:
    """How many pages of ``path`` are in the page cache (``mincore`` of a fresh mapping)."""
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long]  # fmt: skip
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vector = (ctypes.c_ubyte * pages)()
        try:
            assert _libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector) == 0
        finally:
            _libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in vector)


def test_page_cache_of_the_view_cannot_be_evicted(any_sandbox: LocalSandbox) -> None:
    where = any_sandbox.run("import os\nprint(os.path.realpath(os.__file__))")
    path = where.stdout.strip()  # the sandbox's standard library: in every level's view
    Path(path).read_bytes()
    cached = _resident_pages(path)
    code = (
        "import mmap, os\n"
        f"fd = os.open({path!r}, os.O_RDONLY)\n"
        "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n"
        "mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n"
        "mapped.madvise(21)\n"  # MADV_PAGEOUT
        "print('asked')\n"
    )
    result = any_sandbox.run(code)
    if any_sandbox.isolation_report()["syscalls"] is None:
        pytest.skip("syscalls: reported missing at this isolation level")
    assert result.stdout == "asked\n", result  # succeeds as far as the code can tell
    assert cached > 0 and _resident_pages(path) == cached


def test_host_directories_cannot_be_watched(any_sandbox: LocalSandbox, tmp_path: Path) -> None:
    report = any_sandbox.isolation_report()
    if report["filesystem"] is None:
        pytest.skip("filesystem: reported missing at this isolation level")
    tmp_path.chmod(0o755)  # a host directory anyone may list, outside the view
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.inotify_init1(0)\n"
        f"for path in ({str(CHECKOUT)!r}, {str(tmp_path)!r}):\n"
        "    print(fd >= 0 and libc.inotify_add_watch(fd, path.encode(), 0xFFF) >= 0)\n"
    )
    result = any_sandbox.run(code)
    assert result.stdout == "False\n" * 2, result


def test_boot_id_and_machine_counters_are_hidden(any_sandbox: LocalSandbox) -> None:
    if any_sandbox.isolation_report()["process_list"] != "pid-namespace":
        pytest.skip("no fresh /proc at this isolation level (Landlock hides all of it)")
    code = (
        "for path in ('/proc/sys/kernel/random/boot_id', '/proc/stat', '/proc/loadavg'):\n"
        "    try:\n"
        "        print(path, repr(open(path).read()))\n"
        "    except OSError as exc:\n"
        "        print(path, 'refused', exc.errno)\n"
    )
    result = any_sandbox.run(code)
    seen = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert len(seen) == 3 and boot_id not in result.stdout, result
    assert all(said in ("''", "refused 13", "refused 2") for said in seen.values()), result
