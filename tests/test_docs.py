"""Every code block of README.md and docs/*.md runs as written.

Each block runs in a temporary directory (with the repository's ``examples/`` linked in):

* ``python`` blocks run as a script, with this checkout first on the path;
* ``bash`` blocks run with ``bash -e``: ``palaestra`` and ``python`` are this checkout's,
  ``pip install`` and ``python -m pytest`` lines are skipped (the test environment is the
  installed one; the test command is pinned by tests/test_readme.py), a ``palaestra serve``
  or ``serve-retriever`` passes when it is still serving after a few seconds, and any
  other command must exist here;
* ``yaml``, ``toml`` and ``json`` blocks parse.

A block whose first line is a visible marker, ``# needs: a GPU`` (or ``a model``, its
weights, never downloaded here; ``an API key``, ``a server``, ``a Docker engine``, ``a Ray
cluster``, ``hours of CPU``; several joined by ``and``), is only compiled (python) or
syntax-checked (``bash -n``). Blocks in other languages (``text``, none) are prose. Blocks whose commands train or run examples are
marked ``slow``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import child_env

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash"}
PARSE_LANGUAGES = {"yaml", "yml", "toml", "json"}
NEEDS = (
    "a GPU",
    "a model",
    "an API key",
    "a server",
    "a Docker engine",
    "a Ray cluster",
    "hours of CPU",
    "root",
)
MARKER = re.compile(r"^#\s*needs:\s*(.+)$")
SLOW = re.compile(
    r'palaestra (?:--import \S+ )*train|GRPOTrainer\(|examples/|--all\b|HumanEval|eval "game:\*"'
)
"""Commands that train, run examples, or play a whole family (minutes on 2 cores)."""
SERVE_SECONDS = 8
TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and its text."""

    path: Path
    line: int
    language: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def needs(self) -> str | None:
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        marker = MARKER.match(first)
        return marker.group(1).strip() if marker else None


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file (``` or ~~~, any length, info string kept)."""
    blocks, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^\s*(`{3,}|~{3,})[ \t]*([^`\s]*)", lines[i])
        i += 1
        if not opening:
            continue
        fence, start, body = opening.group(1), i, []
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        blocks.append(
            Block(path, start, opening.group(2).lower(), textwrap.dedent("\n".join(body)))
        )
    return blocks


def _collect() -> list[pytest.param]:
    params = []
    for path in DOCS:
        for block in code_blocks(path):
            if block.language not in RUN_LANGUAGES and block.language not in PARSE_LANGUAGES:
                continue
            slow = block.needs is None and SLOW.search(block.text)
            marks = [pytest.mark.slow, pytest.mark.timeout(TIMEOUT_S)] if slow else []
            params.append(pytest.param(block, id=block.name, marks=marks))
    return params


@pytest.mark.parametrize("block", _collect())
def test_code_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.language in PARSE_LANGUAGES:
        _parse(block)
    elif block.needs is not None:
        _check_marker(block.needs)
        _compile(block, tmp_path)
    else:
        _run(block, tmp_path)


def _check_marker(needs: str) -> None:
    parts = [part.strip() for part in re.split(r"\band\b|,", needs.split("(")[0]) if part.strip()]
    unknown = [part for part in parts if part not in NEEDS]
    assert not unknown, f"unknown needs {unknown}: the marker names one of {NEEDS}"


def _parse(block: Block) -> None:
    if block.language in ("yaml", "yml"):
        yaml = pytest.importorskip("yaml", reason="YAML blocks need PyYAML (extra 'train')")
        yaml.safe_load(block.text)
    elif block.language == "toml":
        tomllib.loads(block.text)
    else:
        json.loads(block.text)


def _compile(block: Block, tmp_path: Path) -> None:
    if RUN_LANGUAGES[block.language] == "python":
        compile(block.text, block.name, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
        return
    script = tmp_path / "block.sh"
    script.write_text(block.text, encoding="utf-8")
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def _run(block: Block, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "examples").symlink_to(ROOT / "examples")
    env = _environment(tmp_path)
    if RUN_LANGUAGES[block.language] == "python":
        script = tmp_path / "block.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        command = ["bash", "-e", str(script)]
    script.write_text(block.text, encoding="utf-8")
    try:
        done = subprocess.run(
            command, cwd=workdir, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.name} ran over {TIMEOUT_S} s:\n{(exc.stdout or '')[-2000:]}")
    assert done.returncode == 0, (
        f"{block.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def _environment(tmp_path: Path) -> dict[str, str]:
    """This checkout first on the path, and shims for ``palaestra``, ``python`` and ``pip``."""
    shims = tmp_path / "bin"
    shims.mkdir()
    python = sys.executable
    _shim(shims / "palaestra", PALAESTRA_SHIM.format(python=python, seconds=SERVE_SECONDS))
    for name in ("python", "python3"):
        _shim(shims / name, PYTHON_SHIM.format(python=python))
    _shim(shims / "pip", "#!/bin/sh\necho 'skipped in the docs test: pip' \"$@\"\n")
    return child_env(PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")


def _shim(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


PYTHON_SHIM = """#!/bin/sh
case "$1 $2" in
  "-m pip"|"-m pytest") echo "skipped in the docs test: $*"; exit 0 ;;
esac
exec {python} "$@"
"""

PALAESTRA_SHIM = """#!/bin/sh
case " $* " in
  *" serve "*|*" serve-retriever "*)
    {python} -m palaestra.cli "$@" &
    server=$!
    sleep {seconds}
    if kill -0 "$server" 2>/dev/null; then kill "$server"; wait "$server"; exit 0; fi
    wait "$server"; exit $? ;;
esac
exec {python} -m palaestra.cli "$@"
"""
