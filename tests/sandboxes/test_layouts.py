"""The sandbox runs Python from wherever it is installed; the escape suite holds for each layout.

Layouts built here: a venv in a temporary directory (its prefix under the run's ``/tmp``), an
interpreter with its standard library copied under a ``0700`` home (where only its owner
may enter), and the system prefix's interpreter. The interpreter running the tests is the
fourth (here and in CI often pyenv or a venv). The default suite checks each layout with
a few runs; ``-m slow`` runs the whole sandbox suite with each layout's interpreter
(``PALAESTRA_TEST_SANDBOX_PYTHON``, see ``tests/sandboxes/conftest.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from palaestra.sandboxes import LocalSandbox
from tests.conftest import CHECKOUT, child_env

SYSTEM_PYTHON = "/usr/bin/python3"


def _venv_in_a_temporary_directory(root: Path) -> str:
    folder = Path(tempfile.mkdtemp(dir=root))  # 0700, like any mkdtemp
    venv = folder / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    return str(venv / "bin" / "python")


def _static_system_interpreter() -> str | None:
    """The system prefix's interpreter, if it needs no shared libpython (so it can move)."""
    if not os.path.exists(SYSTEM_PYTHON) or shutil.which("ldd") is None:
        return None
    real = os.path.realpath(SYSTEM_PYTHON)
    linked = subprocess.run(["ldd", real], capture_output=True, text=True).stdout
    return None if "libpython" in linked else real


def _interpreter_under_a_private_home(root: Path) -> str | None:
    """A copy of the system interpreter and its standard library in a ``0700`` home."""
    source = _static_system_interpreter()
    if source is None:
        return None
    ask = "import sysconfig, sys; print(sysconfig.get_path('stdlib')); print('%d.%d' % sys.version_info[:2])"  # fmt: skip
    stdlib, version = subprocess.run(
        [source, "-I", "-c", ask], capture_output=True, text=True, check=True
    ).stdout.split()
    home = Path(tempfile.mkdtemp(dir=root))
    home.chmod(0o700)
    prefix = home / "python"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(source, prefix / "bin" / f"python{version}")
    skipped = shutil.ignore_patterns("__pycache__", "test", "site-packages", "dist-packages")
    shutil.copytree(stdlib, prefix / "lib" / f"python{version}", ignore=skipped)
    return str(prefix / "bin" / f"python{version}")


@pytest.fixture(scope="module")
def layouts() -> Iterator[dict[str, str]]:
    """Layout name -> its interpreter (layouts this machine cannot build are left out)."""
    root = Path(tempfile.mkdtemp(prefix="palaestra-layouts-"))
    root.chmod(0o755)
    built = {"venv in a temporary directory": _venv_in_a_temporary_directory(root)}
    private = _interpreter_under_a_private_home(root)
    if private:
        built["interpreter under a 0700 home"] = private
    if os.path.exists(SYSTEM_PYTHON):
        built["system prefix"] = SYSTEM_PYTHON
    yield built
    shutil.rmtree(root)


LAYOUTS = ["venv in a temporary directory", "interpreter under a 0700 home", "system prefix"]

WORKS = (
    "import json, os, subprocess, sys, threading\n"
    "child = subprocess.run([sys.executable, '-c', 'import threading; print(7)'],\n"
    "                       capture_output=True, text=True)\n"
    "try:\n"
    "    open(os.path.join(sys.prefix, 'planted'), 'w')\n"
    "    wrote = True\n"
    "except OSError:\n"
    "    wrote = False\n"
    "print(json.dumps([sys.executable, child.stdout, child.stderr[-300:], wrote]))\n"
)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_runs_confined(layouts: dict[str, str], layout: str) -> None:
    """The interpreter, its standard library and site-packages are there, readable by the
    run's user and read-only; the rest of the confinement is that of the host's Python."""
    if layout not in layouts:
        pytest.skip(f"this machine has no {layout}")
    python = layouts[layout]
    with LocalSandbox(pool_size=1, python=python) as box, LocalSandbox(pool_size=1) as host:
        report, expected = box.isolation_report(), host.isolation_report()
        result = box.run(WORKS, timeout=20)
        limit = box.limits.max_file_mb << 20
        big = box.run(f"with open('big', 'wb') as f:\n    f.write(b'0' * {2 * limit})")
    assert result.ok, result
    executable, child_stdout, child_stderr, wrote = json.loads(result.stdout)
    assert executable == python and child_stdout == "7\n", child_stderr
    assert not wrote
    assert not big.ok and "File too large" in big.stderr, big
    assert report["missing"] == expected["missing"] and report["user"] == expected["user"]


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_whole_sandbox_suite_passes_in_each_layout(
    layouts: dict[str, str], layout: str
) -> None:
    if layout not in layouts:
        pytest.skip(f"this machine has no {layout}")
    env = child_env(PALAESTRA_TEST_SANDBOX_PYTHON=layouts[layout])
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/sandboxes", "-q", "-p", "no:randomly",
         "--ignore", "tests/sandboxes/test_layouts.py"],
        cwd=CHECKOUT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-4000:]
