"""Behaviour of the local backend: results, files, stdin, sessions, the pool, bad input."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from palaestra.sandboxes import ExecResult, Limits, LocalSandbox, Sandbox, SandboxSession
from tests.sandboxes.conftest import fresh_listing, make_box


def test_protocols_are_satisfied(sandbox: LocalSandbox) -> None:
    assert isinstance(sandbox, Sandbox)
    with sandbox.session() as session:
        assert isinstance(session, SandboxSession)


def test_stdout_stderr_and_exit_code(sandbox: LocalSandbox) -> None:
    result = sandbox.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.ok and not result.timed_out


def test_exception_traceback_shows_the_code(sandbox: LocalSandbox) -> None:
    result = sandbox.run("x = 1\nraise ValueError('bad value')")
    assert result.exit_code == 1
    assert 'File "<sandbox>", line 2' in result.stderr and "ValueError: bad value" in result.stderr
    assert "_worker" not in result.stderr


def test_syntax_error_is_a_result(sandbox: LocalSandbox) -> None:
    result = sandbox.run("def f(:\n")
    assert result.exit_code == 1 and "SyntaxError" in result.stderr


def test_files_and_stdin(sandbox: LocalSandbox) -> None:
    files = {"solution.py": "def add(a, b):\n    return a + b\n", "data/n.txt": "40"}
    code = "from solution import add\nprint(add(int(open('data/n.txt').read()), int(input())))"
    assert sandbox.run(code, files=files, stdin="2\n").stdout == "42\n"


def test_large_stdin_arrives_whole(sandbox: LocalSandbox) -> None:
    text = "x" * 3_000_000 + "\n"
    result = sandbox.run("import sys\nprint(len(sys.stdin.read()))", stdin=text)
    assert result.stdout == f"{len(text)}\n"


def test_runs_are_independent(sandbox: LocalSandbox) -> None:
    empty = fresh_listing(sandbox)
    sandbox.run("import builtins\nbuiltins.leak = 1\nopen('left.txt', 'w').write('x')")
    code = "import builtins, os\nprint(hasattr(builtins, 'leak'), sorted(os.listdir('.')))"
    assert sandbox.run(code).stdout == f"False {empty}\n"


def test_bad_arguments_raise_clear_errors(sandbox: LocalSandbox) -> None:
    with pytest.raises(ValueError, match="timeout must be > 0"):
        sandbox.run("pass", timeout=0)
    with pytest.raises(ValueError, match="relative path"):
        sandbox.run("pass", files={"../escape.py": ""})
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=8)


def test_session_keeps_state_and_recovers_from_timeouts(sandbox: LocalSandbox) -> None:
    with sandbox.session() as session:
        assert session.run("import math\nx = 21").ok
        assert session.run("print(x * 2, math.pi > 3)").stdout == "42 True\n"
        assert "NameError" in session.run("print(y)").stderr
        assert session.run("print(x)").stdout == "21\n"  # an error keeps the state
        timed_out = session.run("while True: pass", timeout=0.3)
        assert timed_out.timed_out
        after = session.run("print('x' in globals())")
        assert after.stdout == "False\n" and "restarted" in after.stderr


def test_a_session_cell_that_exits_reports_its_exit_code(sandbox: LocalSandbox) -> None:
    """The cell's own exit code, every time (the runner is killed after its status: a race
    that the kill used to win now and then)."""
    codes = []
    for _ in range(40):
        with sandbox.session() as repl:
            repl.run("x = 1")
            codes.append(repl.run("raise SystemExit(4)").exit_code)
    assert codes == [4] * 40


def test_session_files_persist_until_close(sandbox: LocalSandbox) -> None:
    session = sandbox.session()
    cwd = session.run(
        "import os\nopen('notes.txt', 'w').write('hi')\nprint(os.getcwd())"
    ).stdout.strip()
    assert session.run("print(open('notes.txt').read())").stdout == "hi\n"
    session.close()
    if sandbox.isolation_report()["filesystem"] == "mount-namespace":
        assert cwd == "/tmp"  # the session's own tmpfs, gone with its mount namespace
    else:
        time.sleep(0.2)
        assert not os.path.exists(cwd)
    with sandbox.session() as fresh:
        assert "notes.txt" not in fresh.run("import os\nprint(os.listdir('.'))").stdout


def test_concurrent_runs_use_the_pool() -> None:
    with make_box(pool_size=3) as box:
        box.warm()
        assert len(box.worker_pids()) == 3

        async def main() -> list[ExecResult]:
            return await asyncio.gather(
                *(box.arun("import time\ntime.sleep(0.3)\nprint('done')") for _ in range(6))
            )

        started = time.monotonic()
        results = asyncio.run(main())
        elapsed = time.monotonic() - started
        assert [r.stdout for r in results] == ["done\n"] * 6
        assert elapsed < 1.5  # two waves of three, not six sequential runs


def test_isolation_report_names_each_mechanism(sandbox: LocalSandbox) -> None:
    report = sandbox.isolation_report()
    assert report["network"] in {
        "namespace",
        "landlock+seccomp",
        "seccomp",
        "landlock-tcp",
        "audit-hook",
    }
    assert report["processes"] in {"pid-namespace", "process-group+subreaper"}
    assert report["missing"] == [key for key, value in report.items() if value is None] + (
        ["network"] if report["network"] == "audit-hook" else []
    ) + (["memory"] if report["memory"] == "rlimit-per-process" else [])
    assert report["memory"] in {"cgroup-v1", "cgroup-v2", "rlimit-per-process"}
    assert report["user"] in {"dedicated-uid", "caller-uid", None}


def test_closed_sandbox_refuses_runs() -> None:
    box = make_box(pool_size=1)
    box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.run("pass")


def test_sessions_never_wait_for_each_other():
    """More open sessions than workers: each starts one more worker instead of waiting (a
    process running several episodes would otherwise deadlock on its own sessions)."""
    with make_box(pool_size=1) as box:
        sessions = [box.session() for _ in range(3)]
        for index, session in enumerate(sessions):
            session.run(f"x = {index}")
        assert [s.run("print(x)").stdout for s in sessions] == ["0\n", "1\n", "2\n"]
        for session in sessions:
            session.close()
        assert box.run("print('ok')").stdout == "ok\n"
