"""Judge stdin/stdout programs: one sandbox run per case, the output compared here.

The grader reads up to :data:`~palaestra.verifiers.code_calls.GRADER_OUTPUT_BYTES` of a
program's output (not the sandbox's user-facing cap); an output cut at that size is a
failure that says so, never a wrong answer. How an output is compared is the problem's
:class:`~palaestra.verifiers.code_types.Judging` (line by line with decimal tolerance by
default, tokens, floats, or a checker run in a sandbox run of its own).
"""

from __future__ import annotations

import json
import math
import re
from concurrent.futures import ThreadPoolExecutor

from palaestra.sandboxes import ExecResult, Sandbox
from palaestra.verifiers._programs import CHECKER
from palaestra.verifiers.code_calls import GRADER_OUTPUT_BYTES
from palaestra.verifiers.code_errors import error_location, last_error, stderr_tail
from palaestra.verifiers.code_types import Judging, Problem, TestReport

PARALLEL_CASES = 4
"""Cases of one problem run at once (each in its own sandbox run; the sandbox's pool bounds
how many runs proceed together across problems)."""

CHECKER_TIMEOUT = 30.0
"""Seconds a checker run may take (it runs only the problem's own trusted code)."""

_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+)")


def grade_stdio(
    sandbox: Sandbox, problem: Problem, code: str, *, timeout: float, stop_early: bool = False
) -> TestReport:
    """Run ``code`` on each case's stdin, :data:`PARALLEL_CASES` at a time; ``stop_early``
    runs them in waves of that many and ends with the wave of the first failure."""
    judging, failures, total = problem.judging, [], len(problem.cases)

    def judge(case: tuple[str, str]) -> str | None:
        result = sandbox.run(
            code,
            stdin=case[0],
            timeout=judging.time_limit or timeout,
            memory_mb=judging.memory_mb,
            max_output_bytes=GRADER_OUTPUT_BYTES,
        )
        return _judge_case(sandbox, judging, code, case[0], case[1], result)

    width = min(PARALLEL_CASES, total) or 1
    wave = width if stop_early else total  # early stop: waves, so a failure ends the next
    with ThreadPoolExecutor(width) as pool:
        for start in range(0, total, wave):
            for index, failure in enumerate(
                pool.map(judge, problem.cases[start : start + wave]), start
            ):
                if failure is None:
                    continue
                failures.append(failure)
                if stop_early and index + 1 < total:
                    passed = index + 1 - len(failures)
                    failures.append(f"{total - index - 1} later tests not counted (all-or-nothing reward)")  # fmt: skip
                    return TestReport(passed, total, failures)
    return TestReport(total - len(failures), total, failures)


def _judge_case(
    sandbox: Sandbox, judging: Judging, code: str, stdin: str, expected: str, result: ExecResult
) -> str | None:
    """Why the case failed (input, what the program printed, its stderr), or None."""
    shown = f"input {stdin[:200] + ('...' if len(stdin) > 200 else '')!r}"
    if not result.ok:
        where = error_location(result.stderr, code, "<sandbox>")
        detail = " ".join(p for p in (last_error(result.stderr), where and f"({where})") if p)
        return f"{shown}: the program {result.describe()} {detail}".strip()
    if result.truncated:
        return f"{shown}: the output is over the {GRADER_OUTPUT_BYTES} bytes the grader reads"
    if judging.checker is not None:
        verdict = run_checker(sandbox, judging.checker, stdin, result.stdout, expected)
        if isinstance(verdict, str):
            return f"{shown}: {verdict}"
        if verdict:
            return None
    elif outputs_match(result.stdout, expected, judging):
        return None
    failure = f"{shown}: wrong output {result.stdout.strip()[:200]!r}"
    if result.stderr.strip():
        failure += f"; stderr: {stderr_tail(result.stderr)!r}"
    return failure


def outputs_match(output: str, expected: str, judging: Judging) -> bool:
    """Whether ``output`` is an accepted answer for ``expected`` under ``judging.compare``."""
    if judging.compare in ("tokens", "float"):
        tolerance = judging.tolerance if judging.compare == "float" else None
        return _tokens_match(output.split(), expected.split(), tolerance, everything=True)
    got, want = _lines(output), _lines(expected)
    if len(got) != len(want):
        return False
    tolerance = judging.tolerance if judging.compare == "lines" else None
    return all(
        g == w or _tokens_match(g.split(), w.split(), tolerance, everything=False)
        for g, w in zip(got, want, strict=True)
    )


def normalize_output(text: str) -> str:
    """``text`` with each line's surrounding whitespace and the blank lines at its ends dropped."""
    return "\n".join(_lines(text))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _tokens_match(
    got: list[str], want: list[str], tolerance: float | None, *, everything: bool
) -> bool:
    """Token by token: equal, or numbers within ``tolerance`` (any number if
    ``everything``, else only where the expected token is written as a decimal)."""
    if len(got) != len(want):
        return False
    return all(
        g == w or (tolerance is not None and _close(g, w, tolerance, everything))
        for g, w in zip(got, want, strict=True)
    )


def _close(got: str, want: str, tolerance: float, everything: bool) -> bool:
    if not everything and not _DECIMAL.fullmatch(want):
        return False
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    return math.isfinite(a) and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def run_checker(
    sandbox: Sandbox, checker: str, stdin: str, output: str, expected: str
) -> bool | str:
    """The problem's checker on one answer (in a run of its own); a string says why it failed."""
    case = json.dumps({"input": stdin, "output": output, "expected": expected})
    result = sandbox.run(
        CHECKER,
        files={"checker.py": checker, "case.json": case},
        timeout=CHECKER_TIMEOUT,
        max_output_bytes=GRADER_OUTPUT_BYTES,
    )
    verdict = result.stdout.strip().splitlines()[-1:] if result.ok else []
    if verdict in (["true"], ["false"]):
        return verdict == ["true"]
    return f"the problem's checker failed: {last_error(result.stderr) or result.describe()}"
