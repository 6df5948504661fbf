"""The escape and abuse classes of the adversarial review, one test each, at every level.

Each test runs on every isolation level (``any_sandbox``) and either shows the class is
contained or, where a level lacks the mechanism, checks that ``isolation_report()`` names
it as missing and skips with the reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import palaestra
from palaestra.sandboxes import Limits, LocalSandbox
from palaestra.sandboxes.pool import SandboxWorkerError
from tests.conftest import child_env
from tests.sandboxes.conftest import LEVELS, fresh_listing, make_box

_libc = ctypes.CDLL(None, use_errno=True)


def require(box: LocalSandbox, protection: str) -> str:
    """The mechanism behind ``protection``; skips (it is reported missing) when there is none."""
    report = box.isolation_report()
    if report[protection] is None:
        assert protection in report["missing"]
        pytest.skip(f"{protection}: reported missing at this isolation level")
    return report[protection]


def test_host_unix_sockets_are_unreachable(any_sandbox: LocalSandbox, tmp_path: Path) -> None:
    require(any_sandbox, "host_sockets")
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    path.chmod(0o777)
    tmp_path.chmod(0o755)
    code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\nprint('connected')"
    result = any_sandbox.run(code)
    server.close()
    assert "connected" not in result.stdout and result.exit_code == 1


def test_file_metadata_outside_the_work_dir_cannot_change(any_sandbox: LocalSandbox) -> None:
    require(any_sandbox, "file_metadata")
    target = os.path.realpath(sys.executable)  # visible at every level, owned by the host
    before = os.stat(target)
    code = (
        "import os\n"
        f"path = {target!r}\n"
        "attempts = [lambda: os.chmod(path, 0o4777), lambda: os.chown(path, 0, 0),\n"
        "            lambda: os.utime(path, (0, 0)), lambda: os.setxattr(path, b'user.x', b'1')]\n"
        "for attempt in attempts:\n"
        "    try:\n"
        "        attempt()\n"
        "        print('changed')\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n"
    )
    result = any_sandbox.run(code)
    after = os.stat(target)
    assert result.stdout.count("refused") == 4, result
    assert (after.st_mode, after.st_uid, after.st_mtime) == (before.st_mode, before.st_uid, before.st_mtime)  # fmt: skip


def test_host_keyring_is_out_of_reach(any_sandbox: LocalSandbox) -> None:
    add_key = 248 if os.uname().machine == "x86_64" else 217
    serial = _libc.syscall(add_key, b"user", b"palaestra-test-key", b"hunter2", 7, -3)  # @s
    if serial < 0:
        pytest.skip("this process has no session keyring to test with")
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "found = libc.syscall(249 if __import__('os').uname().machine == 'x86_64' else 218,\n"
        "                     b'user', b'palaestra-test-key', None, 0)\n"
        "print('found' if found >= 0 else 'not found')\n"
    )
    try:
        result = any_sandbox.run(code)
    finally:
        keyctl, revoke = (250 if os.uname().machine == "x86_64" else 219), 3
        _libc.syscall(keyctl, revoke, serial)
    assert result.stdout == "not found\n", result


def test_sysv_ipc_is_private_and_left_behind_by_no_run(any_sandbox: LocalSandbox) -> None:
    require(any_sandbox, "ipc")
    shm_before = Path("/proc/sysvipc/shm").read_text()
    msg_before = Path("/proc/sysvipc/msg").read_text()
    host_id = _libc.shmget(0x5EC12E7, 4096, 0o1000 | 0o666)  # IPC_CREAT
    try:
        code = (
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print('host shm', libc.shmget(0x5EC12E7, 0, 0) >= 0)\n"
            "print('own shm', libc.shmget(0x1234, 1 << 20, 0o1000 | 0o666) >= 0)\n"
            "print('own queue', libc.msgget(0x1234, 0o1000 | 0o666) >= 0)\n"
        )
        own = any_sandbox.isolation_report()["ipc"] == "ipc-namespace"  # else seccomp denies
        result = any_sandbox.run(code)
        assert result.stdout == f"host shm False\nown shm {own}\nown queue {own}\n", result
        second = any_sandbox.run("import ctypes\nprint(ctypes.CDLL(None).shmget(0x1234, 0, 0))")
        assert second.stdout == "-1\n"
    finally:
        _libc.shmctl(host_id, 0, None)  # IPC_RMID
    assert Path("/proc/sysvipc/shm").read_text() == shm_before
    assert Path("/proc/sysvipc/msg").read_text() == msg_before


def test_host_processes_are_invisible(any_sandbox: LocalSandbox) -> None:
    require(any_sandbox, "process_list")
    code = (
        "import os\n"
        "try:\n"
        "    names = [open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]\n"
        "    print(len(names), b'pytest' in b''.join(names))\n"
        "except OSError as exc:\n"
        "    print('denied', type(exc).__name__)\n"
    )
    result = any_sandbox.run(code)
    assert "True" not in result.stdout and result.stdout.strip(), result


def test_a_run_sees_nothing_of_earlier_runs(any_sandbox: LocalSandbox) -> None:
    secret = "sekret-of-run-one-" + "7f3a9c"
    empty = fresh_listing(any_sandbox)
    any_sandbox.run(f"x = {secret!r}\nprint(input())", stdin=secret, files={"s.txt": secret})
    scan = (
        "import os, re\n"
        "needle = ''.join(['sekret-of-run-', 'one-7f3a9c']).encode()\n"
        "control = ''.join(['sekret-of-run-', 'two-7f3a9c']).encode()\n"  # never used by a run
        "hits = 0\n"
        "mem = open('/proc/self/mem', 'rb', buffering=0)\n"
        "for line in open('/proc/self/maps'):\n"
        "    start, end = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "    if 'r' not in line.split()[1] or '[vsyscall]' in line:\n"
        "        continue\n"
        "    try:\n"
        "        mem.seek(start)\n"
        "        chunk = mem.read(end - start)\n"
        "        hits += chunk.count(needle) - chunk.count(control)\n"
        "    except (OSError, ValueError, OverflowError):\n"
        "        pass\n"
        "print('hits', hits, sorted(os.listdir('.')))\n"
    )
    result = any_sandbox.run(scan)
    if "No such file" in result.stderr or "Permission" in result.stderr:
        pytest.skip("/proc/self is hidden at this level, so nothing can be scanned")
    assert result.stdout == f"hits 0 {empty}\n", result


def test_the_project_checkout_is_unreadable(any_sandbox: LocalSandbox) -> None:
    require(any_sandbox, "filesystem")
    source = Path(palaestra.__file__).resolve()
    result = any_sandbox.run(f"print(open({str(source)!r}).read()[:20])")
    assert result.exit_code == 1 and not result.stdout


def test_disk_and_inode_quota() -> None:
    with make_box(pool_size=1, limits=Limits(work_dir_mb=8, work_dir_files=64)) as box:
        if box.isolation_report()["disk_quota"] is None:
            pytest.skip("no private tmpfs at this level")
        empty = fresh_listing(box)
        fill = "f = open('big', 'wb')\nfor _ in range(32):\n    f.write(b'0' * (1 << 20))\n    f.flush()"
        assert "No space left" in box.run(fill).stderr
        files = "for i in range(1000):\n    open(f'f{i}', 'w').close()"
        assert "No space left" in box.run(files).stderr
        assert fresh_listing(box) == empty


def test_a_deep_tree_is_cleaned_up_and_the_result_kept(any_sandbox: LocalSandbox) -> None:
    code = (
        "import os\n"
        "print(os.getcwd(), flush=True)\n"
        "for _ in range(1500):  # deeper than the path limit and than recursion can go\n"
        "    os.mkdir('d' * 100)\n"
        "    os.chdir('d' * 100)\n"
        "    open('f', 'w').write('x')\n"
        "try:\n"
        "    os.chmod('.', 0)\n"
        "except OSError:\n"
        "    pass\n"
        "print('deep')\n"
    )
    result = any_sandbox.run(code, timeout=20)
    assert result.ok and result.stdout.endswith("deep\n"), result
    work_dir = Path(result.stdout.split()[0])
    if work_dir != Path("/tmp"):
        deadline = time.monotonic() + 10
        while work_dir.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not work_dir.exists()


def test_memory_is_limited_per_run_not_per_process(any_sandbox: LocalSandbox) -> None:
    if any_sandbox.isolation_report()["memory"] == "rlimit-per-process":
        assert "memory" in any_sandbox.isolation_report()["missing"]
        pytest.skip("memory: only a per-process limit at this level")
    code = (
        "import os, time\n"
        "pid = os.fork()\n"
        "block = b'x' * (100 << 20)\n"  # 100 MiB in each of two processes, 128 MiB for the run
        "time.sleep(0.5)\n"
        "if pid:\n"
        "    print('both survived' if os.waitpid(pid, 0)[1] == 0 else 'child killed')\n"
    )
    result = any_sandbox.run(code, memory_mb=128)
    assert "both survived" not in result.stdout and result.memory_exceeded, result


def test_the_result_cannot_be_forged(any_sandbox: LocalSandbox) -> None:
    forge = (
        "import json, os, struct, sys\n"
        "fake = json.dumps({'exit_code': 'zero', 'memory_error': True, 'exited': True,\n"
        "                   'timed_out': True, 'nonce': 'x'}).encode()\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, struct.pack('>I', len(fake)) + fake)\n"
        "    except OSError:\n"
        "        pass\n"
        "sys.exit(7)\n"
    )
    result = any_sandbox.run(forge)
    assert result.exit_code == 7 and type(result.exit_code) is int
    assert not result.memory_exceeded and not result.timed_out


def test_only_the_runner_own_exit_ends_the_run(any_sandbox: LocalSandbox) -> None:
    """The exit status is the runner's: a child or a thread that exits with 0 first does not
    end the run early or decide its status, and no descriptor of the sandbox's plumbing
    (requests, statuses, the exit-notice listener) is left open to the code."""
    child_exits_first = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "time.sleep(0.2)\n"
        "print('after the child', flush=True)\n"
        "raise SystemExit(3)\n"
    )
    result = any_sandbox.run(child_exits_first)
    assert (result.exit_code, result.stdout) == (3, "after the child\n"), result
    thread_exits = "import os, threading\nthreading.Thread(target=os._exit, args=(5,)).start()\n"
    thread_exits += "import time\ntime.sleep(5)\n"
    result = any_sandbox.run(thread_exits, timeout=3)
    assert result.exit_code == 5 and not result.timed_out, result
    threaded_child = (  # its exit_group is notified too, answered, and ends all its threads
        "import subprocess, sys\n"
        "code = 'import threading, time; threading.Thread(target=time.sleep, args=(60,)).start()'\n"
        "subprocess.run([sys.executable, '-c', code + '; import os; os._exit(0)'], timeout=20)\n"
        "print('child done')\n"
    )
    result = any_sandbox.run(threaded_child, timeout=20)
    assert result.ok and result.stdout == "child done\n", result
    result = any_sandbox.run(
        "import os\nopen_fds = []\nfor fd in range(3, 256):\n    try:\n        os.fstat(fd)\n"
        "        open_fds.append(fd)\n    except OSError:\n        pass\nprint(open_fds)\n"
    )
    assert result.stdout == "[]\n", result


def test_session_cells_cannot_forge_later_results(any_sandbox: LocalSandbox) -> None:
    with any_sandbox.session() as session:
        forge = (
            "import json, os, struct\n"
            "for fd in range(3, 64):\n"
            "    for _ in range(5):\n"
            "        fake = json.dumps({'nonce': 'guess', 'exit_code': 0, 'exited': False}).encode()\n"
            "        try:\n"
            "            os.write(fd, struct.pack('>I', len(fake)) + fake)\n"
            "        except OSError:\n"
            "            pass\n"
        )
        session.run(forge)
        failing = session.run("assert False, 'must fail'")
        assert failing.exit_code == 1 and "must fail" in failing.stderr
        malformed = (
            "import os, struct\nos.write(4, struct.pack('>I', 17) + b'{\"exit_code\": \"0\"}')"
        )
        session.run(malformed)
        after = session.run("assert False")
        assert after.exit_code != 0


def test_a_stalled_session_is_killed_within_its_timeout(any_sandbox: LocalSandbox) -> None:
    with any_sandbox.session() as session:
        hang = "import builtins, time\nbuiltins.compile = lambda *args, **kwargs: time.sleep(3600)"
        session.run(hang)  # every later cell hangs before it starts
        stalled = session.run("print('never runs')", timeout=0.5)
        # timed_out: the monitor killed it at the cell's deadline (the host's grace period
        # would have ended it as a failure instead)
        assert stalled.timed_out and "never runs" not in stalled.stdout
        assert session.run("print('fresh')").stdout == "fresh\n"


def test_sessions_get_no_cpu_between_cells(any_sandbox: LocalSandbox) -> None:
    with any_sandbox.session() as session:
        session.run("import threading, time\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()")  # fmt: skip
        first = float(session.run("print(time.process_time())").stdout)
        time.sleep(1.0)
        second = float(session.run("print(time.process_time())").stdout)
        assert second - first < 0.5  # a spinning thread would have used about 1 s


def test_session_cpu_time_is_bounded() -> None:
    box = make_box(pool_size=1, limits=Limits(session_cpu_seconds=1))
    with box, box.session() as session:
        spin = "t = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass"
        session.run("import time")
        for _ in range(3):  # 0.6 s of CPU each: the second or third exceeds 1 s
            result = session.run(spin, timeout=5)
            if not result.ok:
                break
        assert not result.ok and not result.timed_out
        assert "restarted" in session.run("print(1)").stderr


def test_closing_a_session_never_delays_other_runs() -> None:
    with make_box(pool_size=2) as box:
        box.warm()
        session = box.session()
        session.run(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()"
        )
        closer = threading.Thread(target=session.close)
        closer.start()
        assert box.run("print('other run')", timeout=5).stdout == "other run\n"
        closer.join(timeout=10)
        assert not closer.is_alive()


def test_dangerous_syscalls_are_denied(any_sandbox: LocalSandbox) -> None:
    require(any_sandbox, "syscalls")
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "buf = ctypes.create_string_buffer(256)\n"
        "calls = {'io_uring_setup': (425, 8, buf), 'userfaultfd': (323, 0), 'add_key': (248, b'user', b'k', b'v', 1, -3),\n"
        "         'unshare_user': (272, 0x10000000), 'bpf': (321, 0, buf, 0), 'ptrace': (101, 16, 1, 0, 0)}\n"
        "for name, args in calls.items():\n"
        "    result = libc.syscall(*args)\n"
        "    print(name, result, ctypes.get_errno())\n"
    )
    result = any_sandbox.run(code)
    lines = result.stdout.splitlines()
    assert len(lines) == 6 and all(line.endswith(" -1 1") for line in lines), result  # EPERM


def test_udp_to_loopback_is_blocked(any_sandbox: LocalSandbox) -> None:
    if any_sandbox.isolation_report()["network"] == "audit-hook":
        pytest.skip("network: reported missing at this isolation level")
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.sendto(b'leak', ('127.0.0.1', {port}))\n"
        "print('sent')\n"
    )
    result = any_sandbox.run(code)
    with pytest.raises(TimeoutError):
        server.recv(16)
    server.close()
    assert "sent" not in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal concerns root")
def test_root_without_filesystem_isolation_is_refused() -> None:
    box = make_box(pool_size=1, namespaces=False, landlock=False)
    with pytest.raises(SandboxWorkerError, match="allow_unconfined_root"):
        box.run("print(1)")
    box.close()


@pytest.mark.parametrize("level", list(LEVELS))
def test_each_level_reports_what_is_missing(level: str) -> None:
    with make_box(pool_size=1, **LEVELS[level]) as box:
        report = box.isolation_report()
    missing = set(report["missing"])
    if level == "default" and report["filesystem"] == "mount-namespace":
        assert missing <= {"memory", "process_count", "cpu_share"}  # cgroups may be unusable
    if level == "no-cgroups":
        assert {"memory", "cpu_share"} <= missing and report["process_count"] != "cgroup-v1"
        if os.geteuid() == 0:  # a root host's runs still get an unprivileged uid of their own
            assert report["user"] == "dedicated-uid" and report["process_count"] == "rlimit"
    if level in ("no-mount", "no-namespaces", "rlimits-only"):
        assert "disk_quota" in missing and report["filesystem"] != "mount-namespace"
    if level in ("no-namespaces", "rlimits-only"):
        assert "host_name" in missing
        assert report["ipc"] == ("seccomp" if level == "no-namespaces" else None)
        assert report["processes"] == "process-group+subreaper"
    if level == "rlimits-only":
        assert {"filesystem", "syscalls", "file_metadata", "host_sockets", "memory"} <= missing


def _worker_cgroups(worker_pids: set[int]) -> list[str]:
    """Cgroup directories of these workers (named after the worker's pid), in any hierarchy."""
    names = {f"palaestra-sandbox-{pid}" for pid in worker_pids}
    return [root for root, _, _ in os.walk("/sys/fs/cgroup") if os.path.basename(root) in names]


@pytest.mark.parametrize("level", list(LEVELS))
def test_clean_up_leaves_no_files_processes_cgroups_or_ipc(level: str) -> None:
    key = random.randrange(1 << 24, 1 << 30)  # a segment left by an earlier run hides nothing
    box = make_box(pool_size=2, **LEVELS[level])
    box.warm()
    workers = set(box.worker_pids())
    report = box.isolation_report()
    assert _worker_cgroups(workers) or "memory" in report["missing"]
    cwd = box.run(f"import ctypes, os\nctypes.CDLL(None).shmget({key}, 4096, 0o1666)\n"
                  "open('x', 'w')\nprint(os.getcwd())").stdout.strip()  # fmt: skip
    box.run("import os, time\nos.fork()\ntime.sleep(30)", timeout=0.3)
    with box.session() as session:
        session.run("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])")  # fmt: skip
    box.close()
    work_root = os.path.dirname(cwd) if cwd != "/tmp" else None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
        _worker_cgroups(workers) or _alive(workers) or (work_root and os.path.exists(work_root))
    ):
        time.sleep(0.05)
    assert _worker_cgroups(workers) == []
    assert not _alive(workers)
    assert work_root is None or not os.path.exists(work_root)
    left = _libc.shmget(key, 0, 0)
    if "ipc" in report["missing"]:  # the plain fallback: the host's IPC namespace, documented
        _libc.shmctl(left, 0, None)  # IPC_RMID
    else:
        assert left == -1, f"a System V segment outlived the sandbox at level {level}"


def _alive(pids: set[int]) -> bool:
    return any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_cgroups_left_by_killed_workers_go_when_the_next_worker_starts() -> None:
    """A host killed with its workers removes nothing; the next worker removes the empty
    cgroups of workers no longer alive, and only those (they stayed for good before)."""
    with make_box(pool_size=1) as box:
        box.warm()
        parents = {os.path.dirname(p) for p in _worker_cgroups(set(box.worker_pids()))}
    if not parents:
        pytest.skip("no cgroup at this isolation level")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, alive = (
        [os.path.join(parent, f"palaestra-sandbox-{pid}") for parent in parents]
        for pid in (gone.pid, os.getpid())
    )
    for path in dead + alive:
        os.makedirs(os.path.join(path, "run-0"))
    try:
        with make_box(pool_size=1) as box:
            box.warm()
        assert not [path for path in dead if os.path.exists(path)]
        assert all(os.path.exists(os.path.join(path, "run-0")) for path in alive)
    finally:
        for path in dead + alive:
            for leftover in (os.path.join(path, "run-0"), path):
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(leftover)


def test_workers_clean_up_after_a_host_that_vanished() -> None:
    host = (
        "import os\n"
        "from palaestra.sandboxes import LocalSandbox\n"
        "box = LocalSandbox(pool_size=2)\n"
        "box.warm()\n"
        "box.run('print(1)')\n"
        "print(*box.worker_pids(), flush=True)\n"
        "os._exit(0)\n"  # no close(): the workers find their pipe closed
    )
    env = child_env()
    done = subprocess.run([sys.executable, "-c", host], capture_output=True, text=True, env=env)
    workers = {int(pid) for pid in done.stdout.split()}
    assert len(workers) == 2, done.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_worker_cgroups(workers) or _alive(workers)):
        time.sleep(0.05)
    assert _worker_cgroups(workers) == [] and not _alive(workers)


def test_clean_up_at_interpreter_exit_is_complete_and_quiet() -> None:
    """A sandbox still open when the host's interpreter exits is closed before the modules
    are torn down: no worker, cgroup or error message is left (``__del__`` used to run too
    late, with ``open`` already gone). A sandbox dropped earlier goes with its pipes."""
    host = (
        "import gc\n"
        "from palaestra.sandboxes import LocalSandbox\n"
        "def dropped():\n"
        "    box = LocalSandbox(pool_size=1)\n"
        "    box.run('print(1)')\n"
        "    return box.worker_pids()\n"
        "print(*dropped(), flush=True)\n"
        "gc.collect()\n"
        "box = LocalSandbox(pool_size=2)\n"  # still open at exit
        "box.warm()\n"
        "box.run('print(1)')\n"
        "print(*box.worker_pids(), flush=True)\n"
    )
    env = child_env()
    done = subprocess.run([sys.executable, "-c", host], capture_output=True, text=True, env=env)
    dropped, kept = ({int(pid) for pid in line.split()} for line in done.stdout.splitlines())
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert len(kept) == 2 and _worker_cgroups(kept) == [] and not _alive(kept)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_worker_cgroups(dropped) or _alive(dropped)):
        time.sleep(0.05)
    assert _worker_cgroups(dropped) == [] and not _alive(dropped)
