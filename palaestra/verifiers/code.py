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
Stdin/stdout problems run the program once per case and compare the output here.

>>> from palaestra.sandboxes import LocalSandbox
>>> problem = FunctionProblem(tests=["assert add(1, 2) == 3"], entry_point="add")
>>> with LocalSandbox() as sandbox:  # doctest: +SKIP
...     grade(sandbox, problem, "def add(a, b):\\n    return a + b").all_passed
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from palaestra.sandboxes import ExecResult, Sandbox
from palaestra.verifiers._plain import Unencodable, decode
from palaestra.verifiers._programs import CALLER, HARNESS

MAX_ROUNDS = 6
"""Harness runs per grading at most (a call nested n deep in other calls needs n + 1)."""

HARNESS_TIMEOUT = 30.0
"""Seconds a harness run may take (it runs only the problem's own trusted code)."""


class Problem(Protocol):
    """What grading needs of a problem (``palaestra.envs.code.problems.CodeProblem`` fits)."""

    kind: Literal["function", "stdio"]
    prompt: str
    tests: list[str]
    cases: list[tuple[str, str]]
    entry_point: str | None

    @property
    def num_tests(self) -> int: ...


@dataclass(frozen=True)
class FunctionProblem:
    """A minimal function problem: asserts that call ``entry_point`` (and any other names)."""

    tests: list[str]
    entry_point: str | None = None
    prompt: str = ""
    kind: Literal["function", "stdio"] = "function"
    cases: list[tuple[str, str]] = field(default_factory=list)

    @property
    def num_tests(self) -> int:
        return len(self.tests)


@dataclass(frozen=True)
class TestReport:
    """How a candidate fared: counts and a short description of each failure.

    A failure names the failing calls of the candidate and how they failed ("wrong result",
    the exception the candidate raised), never a test's expected value: it is shown to the
    policy on retries, which must not be able to hard-code the answers it reveals.
    """

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


def grade(sandbox: Sandbox, problem: Problem, code: str, *, timeout: float = 5.0) -> TestReport:
    """Run ``code`` against every test of ``problem``; ``timeout`` bounds each candidate run."""
    if problem.kind == "stdio":
        return _grade_stdio(sandbox, problem, code, timeout)
    return _grade_function(sandbox, problem, code, timeout)


def _grade_function(sandbox: Sandbox, problem: Problem, code: str, timeout: float) -> TestReport:
    table: dict[str, dict[str, Any]] = {}
    spec = {"prompt": problem.prompt, "tests": problem.tests, "entry_point": problem.entry_point}
    for _ in range(MAX_ROUNDS):
        verdicts = _run_harness(sandbox, {**spec, "table": table})
        if isinstance(verdicts, str):
            return TestReport(0, problem.num_tests, [verdicts])
        missing = list(dict.fromkeys(k for v in verdicts for k in v.get("missing", [])))
        if not missing:
            break
        table.update(_call_candidate(sandbox, code, missing, timeout))
    failures = [_describe(verdict) for verdict in verdicts if verdict.get("error", "") is not None]
    return TestReport(problem.num_tests - len(failures), problem.num_tests, failures)


def _describe(verdict: dict[str, Any]) -> str:
    """One failed test: its calls of the candidate and how it failed (no expected value)."""
    calls = _calls_text(verdict.get("calls", []))
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


def _calls_text(keys: list[str], shown: int = 3, width: int = 120) -> str:
    """The last ``shown`` calls a test made, as ``f(1, 'a')`` (the one that failed is last)."""
    texts = []
    for key in keys[-shown:]:
        try:
            name, args, kwargs = decode(json.loads(key))
            parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            text = f"{name}({', '.join(parts)})"
        except (ValueError, TypeError, Unencodable):
            text = "a call"
        texts.append(text if len(text) <= width else text[: width - 3] + "...")
    earlier = len(keys) - len(texts)
    return ", ".join(texts) + (f" (after {earlier} earlier calls)" if earlier else "")


def _run_harness(sandbox: Sandbox, spec: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The harness's verdict per test, or why it could not run (a fault of the problem)."""
    result = sandbox.run(HARNESS, files={"harness.json": json.dumps(spec)}, timeout=HARNESS_TIMEOUT)
    try:
        verdicts = json.loads(result.stdout)
    except json.JSONDecodeError:
        verdicts = None
    if not isinstance(verdicts, list) or len(verdicts) != len(spec["tests"]):
        tail = result.stderr.strip().splitlines()[-1:] or [result.describe()]
        return f"the test harness failed: {tail[0]}"
    return verdicts


def _call_candidate(
    sandbox: Sandbox, code: str, keys: Sequence[str], timeout: float
) -> dict[str, dict[str, Any]]:
    """Run the candidate on each call in ``keys``; each result as plain data or an error."""
    files = {"solution.py": code, "calls.json": json.dumps(list(keys))}
    result = sandbox.run(CALLER, files=files, timeout=timeout)
    replies: dict[str, dict[str, Any]] = {}
    for line in result.stdout.splitlines():
        reply = _parse_reply(line, len(keys))
        if reply is not None:
            replies.setdefault(keys[reply[0]], reply[1])
    why = _no_result(result)
    return {key: replies.get(key, {"raised": ["RuntimeError", why]}) for key in keys}


def _parse_reply(line: str, count: int) -> tuple[int, dict[str, Any]] | None:
    """One ``[index, {"value": tree} | {"raised": [name, text]}]`` line, checked; else None."""
    try:
        index, reply = json.loads(line)
        if not (type(index) is int and 0 <= index < count and type(reply) is dict):
            return None
        if "value" in reply and len(reply) == 1:
            decode(reply["value"])  # malformed or unhashable values fail here, not in the harness
            return index, reply
        name, text = reply["raised"]
        if len(reply) == 1 and type(name) is str and type(text) is str:
            return index, {"raised": [name, text[:200]]}  # the name must be a builtin
    except (ValueError, TypeError, KeyError, RecursionError, Unencodable):
        return None
    return None


def _no_result(result: ExecResult) -> str:
    if result.ok:
        return "the candidate returned no result for this call"
    detail = result.stderr.strip().splitlines()[-1:] or [""]
    return f"the program {result.describe()} {detail[0]}".strip()


def _grade_stdio(sandbox: Sandbox, problem: Problem, code: str, timeout: float) -> TestReport:
    failures = []
    for stdin, expected in problem.cases:
        result = sandbox.run(code, stdin=stdin, timeout=timeout)
        shown = repr(stdin[:200] + ("..." if len(stdin) > 200 else ""))
        if not result.ok:
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            failures.append(f"input {shown}: the program {result.describe()} {tail[0]}".strip())
        elif normalize_output(result.stdout) != normalize_output(expected):
            failures.append(f"input {shown}: wrong output {result.stdout.strip()[:200]!r}")
    return TestReport(problem.num_tests - len(failures), problem.num_tests, failures)
