"""Grade model-written code against unit tests, in a way the code cannot game.

Expected values never enter the sandbox that runs the candidate. A function problem is
graded in rounds of two sandbox runs:

1. the *harness* (``palaestra/verifiers/_programs.py``) runs the problem's prompt and tests,
   never the candidate; every call to a candidate function is answered from a table of
   results already known, or recorded as missing (a stand-in value lets the test go on
   recording its other calls);
2. the *caller* runs the candidate on the missing arguments and prints each result as
   plain data (``palaestra/verifiers/_plain.py``: exact builtin types only), which the
   trusted process decodes into the table.

Most tests need one round (harness, caller, harness); a call whose arguments depend on
an earlier result takes one more. The harness decides each assert on plain values, so
objects that compare equal to anything, patched builtins or serializers, early exits and
forged output in the candidate's process change nothing but the candidate's own answers.
Call-based problems (argument lists and expected results) call the candidate once and
compare its results here (``palaestra/verifiers/code_calls.py``); stdin/stdout problems run
the program once per case and compare the output here (``palaestra/verifiers/code_stdio.py``).
A problem's :class:`Judging` sets its comparison, checker and limits.

>>> from palaestra.sandboxes import LocalSandbox
>>> problem = FunctionProblem(tests=["assert add(1, 2) == 3"], entry_point="add")
>>> with LocalSandbox() as sandbox:  # doctest: +SKIP
...     grade(sandbox, problem, "def add(a, b):\\n    return a + b").all_passed
True
"""

from __future__ import annotations

import json
from typing import Any

from palaestra.sandboxes import Sandbox
from palaestra.verifiers._programs import HARNESS
from palaestra.verifiers.code_calls import (
    GRADER_OUTPUT_BYTES,
    call_candidate,
    calls_text,
    grade_calls,
)
from palaestra.verifiers.code_stdio import grade_stdio, normalize_output, outputs_match
from palaestra.verifiers.code_types import (
    DEFAULT_JUDGING,
    FunctionProblem,
    Judging,
    Problem,
    TestReport,
)

__all__ = [
    "DEFAULT_JUDGING",
    "FunctionProblem",
    "Judging",
    "Problem",
    "TestReport",
    "grade",
    "normalize_output",
    "outputs_match",
]

MAX_ROUNDS = 6
"""Harness runs per grading at most (a call nested n deep in other calls needs n + 1)."""

HARNESS_TIMEOUT = 30.0
"""Seconds a harness run may take (it runs only the problem's own trusted code)."""


def grade(
    sandbox: Sandbox, problem: Problem, code: str, *, timeout: float = 5.0, stop_early: bool = False
) -> TestReport:
    """Run ``code`` against every test of ``problem``; ``timeout`` bounds each candidate run
    (unless the problem's judging sets a time limit). ``stop_early`` (for an all-or-nothing
    reward) stops at the first failed case, or the first call that times out or crashes."""
    if problem.kind == "stdio":
        return grade_stdio(sandbox, problem, code, timeout=timeout, stop_early=stop_early)
    if problem.kind == "call":
        return grade_calls(sandbox, problem, code, timeout=timeout, stop_early=stop_early)
    return _grade_function(sandbox, problem, code, timeout, stop_early)


def _grade_function(
    sandbox: Sandbox, problem: Problem, code: str, timeout: float, stop_early: bool
) -> TestReport:
    table: dict[str, dict[str, Any]] = {}
    spec = {"prompt": problem.prompt, "tests": problem.tests, "entry_point": problem.entry_point}
    for _ in range(MAX_ROUNDS):
        verdicts = _run_harness(sandbox, {**spec, "table": table})
        if isinstance(verdicts, str):
            return TestReport(0, problem.num_tests, [verdicts])
        missing = list(dict.fromkeys(k for v in verdicts for k in v.get("missing", [])))
        if not missing:
            break
        table.update(
            call_candidate(
                sandbox, code, missing, problem.judging, timeout=timeout, stop_on_failure=stop_early
            )
        )
    failures = [_describe(verdict) for verdict in verdicts if verdict.get("error", "") is not None]
    return TestReport(problem.num_tests - len(failures), problem.num_tests, failures)


def _describe(verdict: dict[str, Any]) -> str:
    """One failed test: its calls of the candidate and how it failed (no expected value)."""
    calls = calls_text(verdict.get("calls", []))
    if "missing" in verdict:
        return f"{calls}: calls nested more than {MAX_ROUNDS} deep in the candidate's results"
    error = verdict.get("error") or "AssertionError"
    if "raised" in verdict:
        name, text = verdict["raised"]
        return f"{calls}: raised {name}: {text}".rstrip(": ")
    if not calls:
        return error  # a fault of the problem (a test that calls nothing)
    if error == "AssertionError":
        return f"{calls}: wrong result"
    return f"{calls}: the result fails the test ({error})"


def _run_harness(sandbox: Sandbox, spec: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The harness's verdict per test, or why it could not run (a fault of the problem)."""
    result = sandbox.run(
        HARNESS,
        files={"harness.json": json.dumps(spec)},
        timeout=HARNESS_TIMEOUT,
        max_output_bytes=GRADER_OUTPUT_BYTES,
    )
    try:
        verdicts = json.loads(result.stdout)
    except json.JSONDecodeError:
        verdicts = None
    if not isinstance(verdicts, list) or len(verdicts) != len(spec["tests"]):
        tail = result.stderr.strip().splitlines()[-1:] or [result.describe()]
        return f"the test harness failed: {tail[0]}"
    return verdicts
