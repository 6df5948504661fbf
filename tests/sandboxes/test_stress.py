"""Many kinds of runs and sessions at once on one pool: every result as expected (slow).

Races between a run's end, its kill and the next runner's hand-off show up only under load;
this found a session cell that exits reported as killed now and then.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from palaestra.sandboxes import ExecResult, LocalSandbox
from tests.sandboxes.conftest import LEVELS

CASES: dict[str, tuple[str, dict, Callable[[ExecResult], bool]]] = {
    "trivial": ("print(6 * 7)", {}, lambda r: r.ok and r.stdout == "42\n"),
    "exit": ("import sys\nsys.exit(3)", {}, lambda r: r.exit_code == 3),
    "os._exit": (
        "import os\nprint('x', flush=True)\nos._exit(9)",
        {},
        lambda r: r.exit_code == 9 and r.stdout == "x\n",
    ),
    "timeout": ("while True:\n    pass", {"timeout": 0.2}, lambda r: r.timed_out),
    "children": (
        "import os\nfor _ in range(5):\n    if os.fork() == 0:\n        os._exit(0)\n"
        "for _ in range(5):\n    os.wait()\nprint('ok')",
        {},
        lambda r: r.ok and r.stdout == "ok\n",
    ),
    "memory": (
        "x = bytearray(900 * 2**20)\nx[::4096] = b'1' * len(x[::4096])",
        {},
        lambda r: r.memory_exceeded or "MemoryError" in r.stderr,
    ),
    "flood": ("import sys\nsys.stdout.write('a' * 500000)", {}, lambda r: r.truncated and r.ok),
    "thread exits": (
        "import os, threading, time\nthreading.Thread(target=os._exit, args=(5,)).start()\n"
        "time.sleep(3)",
        {"timeout": 5},
        lambda r: r.exit_code == 5,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("level", ["default", "no-cgroups", "no-namespaces"])
def test_mixed_runs_and_sessions_under_load(level: str) -> None:
    failures: list[str] = []

    def one(index: int) -> None:
        kind = random.Random(index).choice([*CASES, "session"])
        if kind == "session":
            with box.session() as repl:
                cells = [
                    repl.run("x = 5"),
                    repl.run("print(x * 2)"),
                    repl.run("raise SystemExit(4)"),
                ]
            if not (cells[0].ok and cells[1].stdout == "10\n" and cells[2].exit_code == 4):
                failures.append(f"session: {cells}")
            return
        code, options, expected = CASES[kind]
        result = box.run(code, **options)
        if not expected(result):
            failures.append(f"{kind}: {result}")

    with LocalSandbox(pool_size=6, **LEVELS[level]) as box, ThreadPoolExecutor(12) as threads:
        list(threads.map(one, range(600)))
    assert not failures, failures[:5]
