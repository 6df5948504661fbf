"""Judging rules of the code grader, both ways: correct programs written as a competent agent
writes them score 1 (big outputs, library value types, spaces, floats, several valid
answers), and the wrong programs that reference graders accept score 0.

Labelled against the references' own rules: LiveCodeBench's ``testing_util`` (stripped
lines, numbers compared as decimals), TACO / prime_code (float tolerance; lines compared
through ``zip``, so a missing line passes there), human-eval's ``check()`` (``==`` on
whatever the function returns).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

import pytest

from palaestra.envs.code.problems import CodeProblem
from palaestra.sandboxes import ExecResult, LocalSandbox
from palaestra.verifiers.code import FunctionProblem, Judging, grade, outputs_match
from palaestra.verifiers.code_calls import GRADER_OUTPUT_BYTES, MAX_LOST_CALLS
from palaestra.verifiers.code_stdio import PARALLEL_CASES


@pytest.fixture(scope="module")
def box() -> Iterator[LocalSandbox]:
    with LocalSandbox(pool_size=2) as sandbox:
        yield sandbox


def stdio(cases: list[tuple[str, str]], **judging: object) -> CodeProblem:
    return CodeProblem("t", "statement", "stdio", cases=cases, judging=Judging(**judging))


def calls(name: str, pairs: list[tuple[list, object]], **judging: object) -> CodeProblem:
    return CodeProblem("t", "statement", "call", calls=pairs, entry_point=name, judging=Judging(**judging))  # fmt: skip


SUM_MAX = stdio([("3\n1 2 3\n", "6\n3\n"), ("2\n5 5\n", "10\n5\n")])
READ = "n = int(input())\nxs = list(map(int, input().split()))\n"

LABELLED = [  # (problem, program, verdict, why)
    (SUM_MAX, READ + "print(sum(xs))\nprint(max(xs))", 1, "plain"),
    (SUM_MAX, READ + "print('  ', sum(xs))\nprint(max(xs), '\\t')\n\n\n", 1, "spaces around lines"),
    (
        SUM_MAX,
        "import sys\nd = sys.stdin.buffer.read().split()\nxs = list(map(int, d[1:]))\nsys.stdout.write(f'{sum(xs)}\\n{max(xs)}\\n')",
        1,
        "buffer idioms",
    ),
    (
        SUM_MAX,
        "import os\nd = open(0).read().split()\nxs = list(map(int, d[1:]))\nos.write(1, f'{sum(xs)}\\n{max(xs)}\\n'.encode())",
        1,
        "open(0), os.write",
    ),
    (SUM_MAX, READ + "print(sum(xs))", 0, "a line missing (TACO's zip accepts)"),
    (SUM_MAX, READ + "print(sum(xs))\nprint(max(xs))\n1 / 0", 0, "crash after the right output"),
    (SUM_MAX, READ + "print(sum(xs), max(xs))", 0, "lines joined"),
    (
        SUM_MAX,
        "xs = deque(map(int, open(0).read().split()[1:]))\nprint(sum(xs))\nprint(max(xs))",
        0,
        "relies on imports a harness prepends",
    ),
    (stdio([("4\n", "YES\n")]), "print('yes')", 0, "lowercase YES"),
    (stdio([("4\n", "YES\n")]), "print('YES')", 1, "YES"),
    (stdio([("3\n", "0.3333333333\n")]), "print(1 / int(input()))", 1, "more decimals within 1e-6"),
    (stdio([("3\n", "0.3333333333\n")]), "print(round(1 / int(input()), 3))", 0, "off by 3e-4"),
    (stdio([("3\n", "3\n")]), "print(3.0)", 0, "an integer answer printed as a float"),
]


@pytest.mark.parametrize(
    ("problem", "program", "verdict"),
    [case[:3] for case in LABELLED],
    ids=[case[3] for case in LABELLED],
)
def test_labelled_programs(box: LocalSandbox, problem: CodeProblem, program: str, verdict: int) -> None:  # fmt: skip
    report = grade(box, problem, program)
    assert report.all_passed == bool(verdict), report
    assert verdict or report.passed == 0, report


def test_outputs_of_several_megabytes_are_graded(box: LocalSandbox) -> None:
    """The grader reads past the sandbox's user-facing output cap (64 kB by default)."""
    size = 1_000_000
    big = stdio([(f"{size}\n", "\n".join(map(str, range(size))) + "\n")])
    report = grade(box, big, "print('\\n'.join(map(str, range(int(input())))))", timeout=20)
    assert report.all_passed, report.failures
    results = FunctionProblem(tests=[f"assert f({size}) == list(range({size}))"], entry_point="f")
    assert grade(box, results, "def f(n):\n    return list(range(n))", timeout=20).all_passed
    arguments = FunctionProblem(tests=[f"assert f(list(range({size}))) == {size}"], entry_point="f")
    assert grade(box, arguments, "def f(xs):\n    return len(xs)", timeout=20).all_passed


class Truncating:
    """A sandbox whose every run came back cut at the output cap."""

    def run(self, code: str, *, stdin: str = "", files: Mapping[str, str] | None = None,
            timeout: float = 5.0, memory_mb: int | None = None,
            max_output_bytes: int | None = None) -> ExecResult:  # fmt: skip
        assert max_output_bytes == GRADER_OUTPUT_BYTES
        return ExecResult(stdout="6\n3\n", stderr="", exit_code=0, truncated=True)


def test_a_cut_output_is_never_judged_as_an_answer() -> None:
    [failure, _] = grade(Truncating(), SUM_MAX, "print(...)").failures
    assert f"over the {GRADER_OUTPUT_BYTES} bytes the grader reads" in failure


LIBRARY_RESULTS = {
    "numpy int64": ("import numpy as np\ndef f():\n    return np.int64(7)", "f() == 7"),
    "numpy float64": ("import numpy as np\ndef f():\n    return np.float64(0.5)", "f() == 0.5"),
    "Counter": (
        "from collections import Counter\ndef f():\n    return Counter('aab')",
        "f() == {'a': 2, 'b': 1}",
    ),
    "defaultdict": (
        "from collections import defaultdict\ndef f():\n    d = defaultdict(int)\n    d['a'] += 1\n    return d",
        "f() == {'a': 1}",
    ),
    "OrderedDict": (
        "from collections import OrderedDict\ndef f():\n    return OrderedDict(a=1)",
        "f() == {'a': 1}",
    ),
    "namedtuple": (
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)",
        "f() == (1, 2) and f().y == 2",
    ),
    "Fraction": (
        "from fractions import Fraction\ndef f():\n    return Fraction(1, 2)",
        "f() == 0.5",
    ),
    "huge int": ("def f():\n    return 10 ** 5000 + 1", "f() == 10 ** 5000 + 1 and f() % 10 == 1"),
}


@pytest.mark.parametrize("kind", LIBRARY_RESULTS)
def test_library_value_types_compare_as_eq_does(box: LocalSandbox, kind: str) -> None:
    code, condition = LIBRARY_RESULTS[kind]
    problem = FunctionProblem(tests=[f"assert {condition}", "assert f() != 'x'"], entry_point="f")
    assert grade(box, problem, code).all_passed


def test_user_classes_stay_refused_and_huge_ints_leave_later_calls_alone(box: LocalSandbox) -> None:  # fmt: skip
    problem = FunctionProblem(tests=["assert f(1) == 1", "assert f(2) == 10 ** 5000"], entry_point="f")  # fmt: skip
    sneaky = (
        "class Eq(int):\n    def __eq__(self, o):\n        return True\ndef f(n):\n    return Eq(0)"
    )
    report = grade(box, problem, sneaky)
    assert report.passed == 0 and "not plain data" in report.failures[0]
    assert grade(box, problem, "def f(n):\n    return 1 if n == 1 else 10 ** 5000").all_passed


SLOW_SQUARE = "def sq(n):\n    if n > 100:\n        while True:\n            pass\n    return n * n"


def test_a_time_out_fails_only_the_call_it_cut_off(box: LocalSandbox) -> None:
    problem = calls("sq", [([10**9], 10**18), ([3], 9), ([4], 16)])
    report = grade(box, problem, SLOW_SQUARE, timeout=1.0)
    assert (report.passed, report.total) == (2, 3), report.failures
    assert "timed out" in report.failures[0]
    asserts = FunctionProblem(tests=["assert sq(10**9) == 10**18", "assert sq(3) == 9"], entry_point="sq")  # fmt: skip
    assert grade(box, asserts, SLOW_SQUARE, timeout=1.0).passed == 1


def test_an_endless_program_costs_at_most_a_few_time_limits(box: LocalSandbox) -> None:
    problem = calls("sq", [([10**9 + i], 0) for i in range(10)])
    report = grade(box, problem, SLOW_SQUARE, timeout=0.5)
    assert report.passed == 0
    not_run = sum("not run" in failure for failure in report.failures)
    assert not_run == 10 - MAX_LOST_CALLS and "program timed out" in report.failures[0]


class Counting:
    """A sandbox that counts the candidate's runs (from several threads)."""

    def __init__(self, sandbox: LocalSandbox) -> None:
        self.sandbox, self.runs, self.lock = sandbox, 0, threading.Lock()

    def run(self, code: str, **kwargs: object) -> ExecResult:
        with self.lock:
            self.runs += 1
        return self.sandbox.run(code, **kwargs)


def test_all_or_nothing_stops_at_the_first_failure(box: LocalSandbox) -> None:
    problem = stdio([(f"{n}\n", f"{2 * n}\n") for n in range(1, 13)])
    counting = Counting(box)
    report = grade(counting, problem, "print(0)", stop_early=True)
    # one wave at most (a case of it not yet started when the first fails is cancelled)
    assert counting.runs <= PARALLEL_CASES and report.passed == 0
    assert "11 later tests not counted" in report.failures[-1]
    counting.runs = 0
    assert grade(counting, problem, "print(0)").passed == 0 and counting.runs == 12
    endless = calls("sq", [([10**9], 0), ([3], 9)])
    assert grade(box, endless, SLOW_SQUARE, timeout=0.5, stop_early=True).passed == 0


PERMUTATION_CHECKER = """
def check(input, output, expected):
    n = int(input)
    return sorted(output.split()) == sorted(str(i) for i in range(1, n + 1))
"""


def test_a_checker_accepts_any_valid_answer_and_runs_apart(box: LocalSandbox) -> None:
    problem = stdio([("3\n", "1 2 3\n")], checker=PERMUTATION_CHECKER)
    assert grade(box, problem, "print(3, 1, 2)").all_passed
    assert grade(box, problem, "print(1, 1, 2)").passed == 0
    broken = stdio([("3\n", "1 2 3\n")], checker="def check(i, o, e):\n    return 1 / 0")
    [failure] = grade(box, broken, "print(1, 2, 3)").failures
    assert "checker failed: ZeroDivisionError" in failure


def test_a_problem_time_limit_replaces_the_env_timeout(box: LocalSandbox) -> None:
    slow = "import time\ntime.sleep(1.5)\nprint(1)"
    assert grade(box, stdio([("", "1\n")]), slow, timeout=5).all_passed
    [failure] = grade(box, stdio([("", "1\n")], time_limit=0.5), slow, timeout=5).failures
    assert "timed out" in failure


def test_a_problem_memory_limit_replaces_the_sandboxs(box: LocalSandbox) -> None:
    hungry = "x = bytearray(300 * 2**20)\nprint(1)"
    assert grade(box, stdio([("", "1\n")]), hungry).all_passed
    [failure] = grade(box, stdio([("", "1\n")], memory_mb=128), hungry).failures
    assert "memory" in failure.lower()


@pytest.mark.parametrize(
    ("mode", "output", "expected", "accepted"),
    [
        ("lines", "  1 2\n3  \n\n", "1 2\n3\n", True),
        ("lines", "1  2\n3", "1 2\n3", True),
        ("lines", "1 2 3", "1 2\n3", False),
        ("lines", "0.33333333", "0.333333", True),
        ("lines", "0.3334", "0.333333", False),
        ("lines", "1.0", "1", False),
        ("lines", "nan", "0.5", False),
        ("exact", "0.33333333", "0.333333", False),
        ("tokens", "1 2 3", "1 2\n3", True),
        ("tokens", "1 2", "1 2\n3", False),
        ("float", "1.0000001 2", "1\n2", True),
        ("float", "1.1 2", "1\n2", False),
    ],
)
def test_comparison_modes(mode: str, output: str, expected: str, accepted: bool) -> None:
    assert outputs_match(output, expected, Judging(compare=mode)) is accepted


def test_feedback_names_the_line_of_the_candidate_and_its_stderr(box: LocalSandbox) -> None:
    problem = stdio([("2\n", "4\n")])
    [failure] = grade(box, problem, "n = int(input())\nprint((n * 2)\n").failures
    assert "SyntaxError" in failure and "line 2: print((n * 2)" in failure
    [failure] = grade(box, problem, "n = int(input())\nprint(n // (n - 2))").failures
    assert "ZeroDivisionError" in failure and "line 2: print(n // (n - 2))" in failure
    [failure] = grade(box, problem, "import sys\nprint('debug: n is 2', file=sys.stderr)\nprint(5)").failures  # fmt: skip
    assert "wrong output '5'" in failure and "debug: n is 2" in failure and "4" not in failure
    function = FunctionProblem(tests=["assert f(0) == 1"], entry_point="f")
    [failure] = grade(box, function, "def f(x):\n    y = 1\n    return y // x").failures
    assert "ZeroDivisionError" in failure and "line 3: return y // x" in failure
    [failure] = grade(box, function, "def f(x):\n    return (x\n").failures
    assert "line 2: return (x" in failure and "SyntaxError" in failure
