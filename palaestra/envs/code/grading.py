"""Run a candidate against a problem's tests in a sandbox; model code never runs in-process."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from palaestra.envs.code.problems import CodeProblem
from palaestra.sandboxes import Sandbox

HARNESS = """\
import json, sys, traceback
results = []
for test in json.loads(open("tests.json").read()):
    namespace = {{"__name__": "__test__"}}
    try:
        exec(open("solution.py").read(), namespace)
        exec(test, namespace)
        results.append(None)
    except BaseException as exc:
        results.append(traceback.format_exception_only(type(exc), exc)[-1].strip())
sys.stdout.flush()
print({marker!r} + json.dumps(results))
"""


@dataclass(frozen=True)
class TestReport:
    """How a candidate fared: counts and a short description of each failure."""

    passed: int
    total: int
    failures: list[str]

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


def normalize_output(text: str) -> str:
    """Compare program output ignoring trailing spaces and trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip()


def grade(sandbox: Sandbox, problem: CodeProblem, code: str, *, timeout: float = 5.0) -> TestReport:
    """Run ``code`` against every test of ``problem`` (each test isolated from the others)."""
    if problem.kind == "stdio":
        return _grade_stdio(sandbox, problem, code, timeout)
    return _grade_function(sandbox, problem, code, timeout)


def _grade_function(
    sandbox: Sandbox, problem: CodeProblem, code: str, timeout: float
) -> TestReport:
    marker = f"@@palaestra-{secrets.token_hex(8)}@@"
    files = {"solution.py": code, "tests.json": json.dumps(problem.tests)}
    result = sandbox.run(HARNESS.format(marker=marker), files=files, timeout=timeout)
    _, found, report = result.stdout.rpartition(marker)
    try:
        outcomes = json.loads(report.strip()) if found else None
    except json.JSONDecodeError:
        outcomes = None
    if not isinstance(outcomes, list) or len(outcomes) != len(problem.tests):
        reason = result.describe() if not result.ok else "the test harness was disrupted"
        detail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
        return TestReport(0, problem.num_tests, [f"the program {reason}", *detail])
    failures = [
        f"{test.strip().splitlines()[-1]}  ->  {outcome or 'AssertionError'}"
        for test, outcome in zip(problem.tests, outcomes, strict=True)
        if outcome is not None
    ]
    return TestReport(problem.num_tests - len(failures), problem.num_tests, failures)


def _grade_stdio(sandbox: Sandbox, problem: CodeProblem, code: str, timeout: float) -> TestReport:
    failures = []
    for stdin, expected in problem.cases:
        result = sandbox.run(code, stdin=stdin, timeout=timeout)
        if not result.ok:
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            failures.append(f"input {stdin!r}: the program {result.describe()} {tail[0]}".strip())
        elif normalize_output(result.stdout) != normalize_output(expected):
            failures.append(
                f"input {stdin!r}: expected {expected.strip()!r}, got {result.stdout.strip()[:200]!r}"
            )
    return TestReport(problem.num_tests - len(failures), problem.num_tests, failures)
