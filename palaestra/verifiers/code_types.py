"""What code grading takes and gives: a problem's judging rules and the test report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

CompareMode = Literal["lines", "exact", "tokens", "float"]
COMPARE_MODES = ("lines", "exact", "tokens", "float")


@dataclass(frozen=True)
class Judging:
    """How one problem is judged (the defaults suit most datasets).

    ``compare`` (stdin/stdout output; call results use ``float`` only):

    * ``lines`` (default): line by line, each line's leading and trailing whitespace and
      blank lines at the ends ignored; a token of the expected output written as a decimal
      (``0.333333``, ``1e-9``) matches any number within ``tolerance``;
    * ``exact``: line by line as ``lines``, every token verbatim;
    * ``tokens``: the whitespace-separated tokens, line breaks ignored (Codeforces' token
      checker);
    * ``float``: as ``tokens``, every pair of numbers within ``tolerance`` (absolute or
      relative).

    ``checker``: Python source defining ``check(input, output, expected) -> bool``, for
    problems with several valid answers; it runs in the sandbox, in a run of its own (never
    in the candidate's), and replaces ``compare``. ``time_limit`` (seconds) and
    ``memory_mb`` replace the env's limits for this problem. ``unwrap_expected``: an
    expected call result ``[x]`` also accepts ``x`` (APPS and TACO store results so).
    ``preamble``: code run before the candidate's (``from typing import *`` for LeetCode
    problems, whose starter code uses ``List`` without importing it).
    """

    compare: CompareMode = "lines"
    tolerance: float = 1e-6
    checker: str | None = None
    time_limit: float | None = None
    memory_mb: int | None = None
    unwrap_expected: bool = False
    preamble: str | None = None

    def __post_init__(self) -> None:
        if self.compare not in COMPARE_MODES:
            raise ValueError(
                f"compare must be one of {', '.join(COMPARE_MODES)}, got {self.compare!r}"
            )
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError(f"time_limit must be > 0 seconds, got {self.time_limit}")


DEFAULT_JUDGING = Judging()


class Problem(Protocol):
    """What grading needs of a problem (``palaestra.envs.code.problems.CodeProblem`` fits).

    ``kind``: ``function`` (asserts in ``tests``), ``stdio`` (``cases`` of stdin and
    expected stdout) or ``call`` (``calls`` of argument lists and expected results of
    ``entry_point``, a function name or ``Class.method``).
    """

    kind: Literal["function", "stdio", "call"]
    prompt: str
    tests: list[str]
    cases: list[tuple[str, str]]
    calls: list[tuple[list[Any], Any]]
    entry_point: str | None
    judging: Judging

    @property
    def num_tests(self) -> int: ...


@dataclass(frozen=True)
class FunctionProblem:
    """A minimal function problem: asserts that call ``entry_point`` (and any other names)."""

    tests: list[str]
    entry_point: str | None = None
    prompt: str = ""
    kind: Literal["function", "stdio", "call"] = "function"
    cases: list[tuple[str, str]] = field(default_factory=list)
    calls: list[tuple[list[Any], Any]] = field(default_factory=list)
    judging: Judging = DEFAULT_JUDGING

    @property
    def num_tests(self) -> int:
        return len(self.tests)


@dataclass(frozen=True)
class TestReport:
    """How a candidate fared: counts and a short description of each failure.

    A failure names the failing calls of the candidate and how they failed ("wrong result",
    the exception the candidate raised, the line of its code that raised it), never a
    test's expected value: it is shown to the policy on retries, which must not be able to
    hard-code the answers it reveals.
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
