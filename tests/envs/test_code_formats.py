"""The field's code datasets as published: each loads, its solutions score 1 and the wrong
programs 0, and records of no known shape are refused with the reason.

The samples in ``tests/envs/code_formats/`` are written for these tests in each format's
published layout (APPS/TACO ``input_output``, LiveCodeBench's packed private tests, MBPP's
``test_list``, DeepCoder's and rllm's ``tests``/``ground_truth``, PrimeIntellect's
``verification_info``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import palaestra
from palaestra.envs.code.problems import CodeProblem, load_problems
from palaestra.sandboxes import LocalSandbox
from palaestra.verifiers.code import grade

SAMPLES = Path(__file__).with_name("code_formats")
FORMATS = ["apps", "taco", "livecodebench", "mbpp", "deepcoder", "primeintellect"]


@pytest.fixture(scope="module")
def box() -> Iterator[LocalSandbox]:
    with LocalSandbox(pool_size=2) as sandbox:
        yield sandbox


def problems(name: str) -> list[CodeProblem]:
    return load_problems(SAMPLES / f"{name}.jsonl")


def block(code: str) -> str:
    return f"```python\n{code}\n```"


WRITTEN = {  # LiveCodeBench and rllm publish no solutions: programs as a competent agent writes them
    "abc900_a": "print(3 * int(input()))",
    "deepcoder_7": "import sys\nprint(sys.stdin.readline().strip()[::-1])",
    "9001": "class Solution:\n    def maxSum(self, nums: List[int], k: int) -> int:\n        return sum(sorted(nums)[-k:])",
}


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_loads_and_its_solutions_score_one_through_the_env(
    box: LocalSandbox, name: str
) -> None:
    env = palaestra.make("code:Dataset-v0", path=str(SAMPLES / f"{name}.jsonl"), sandbox=box)
    for index in range(env.problem_count):
        obs, _ = env.reset(options={"index": index})
        problem = env.problems[index]
        _, reward, _, _, info = env.step(block(problem.solution or WRITTEN[problem.task_id]))
        assert reward == 1.0 and info["success"], (name, index, obs)


@pytest.mark.parametrize("name", FORMATS)
def test_wrong_programs_score_zero_in_every_format(box: LocalSandbox, name: str) -> None:
    for problem in problems(name):
        wrong = ["print(0)", "import sys\nsys.exit(0)", "def f(*a):\n    return 0\n"]
        if problem.entry_point:
            method = problem.entry_point.split(".")[-1]
            wrong.append(f"def {method}(*args):\n    return None\n")
            wrong.append(f"class Solution:\n    def {method}(self, *args):\n        return 0\n")
        for code in wrong:
            report = grade(box, problem, code)
            assert report.passed == 0, (name, problem.task_id, code, report)


def test_call_based_records_grade_each_as_it_is(box: LocalSandbox) -> None:
    """APPS's ``fn_name`` records call the function (not stdin); its ``[result]`` outputs
    also accept ``result``; a LeetCode ``class Solution`` is called as
    ``Solution().method`` with ``List`` defined as LeetCode's judge does."""
    vowels, two_sum = problems("apps")[1], problems("taco")[1]
    assert (vowels.kind, vowels.entry_point) == ("call", "count_vowels")
    assert two_sum.entry_point == "Solution.twoSum"
    tuple_result = "class Solution:\n    def twoSum(self, nums: List[int], target: int):\n" + (
        "        return next((i, j) for j in range(len(nums)) for i in range(j)"
        " if nums[i] + nums[j] == target)\n"
    )
    assert grade(box, two_sum, tuple_result).all_passed  # a tuple where a list is expected
    counted = "import numpy as np\ndef count_vowels(s):\n    return np.int64(sum(c in 'aeiouAEIOU' for c in s))\n"  # fmt: skip
    assert grade(box, vowels, counted).all_passed
    off_by_one = "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)\n"
    assert grade(box, vowels, off_by_one).passed == 2  # misses the capitals only


def test_apps_outputs_given_as_lines_compare_as_text(box: LocalSandbox) -> None:
    sum_max = problems("apps")[0]
    assert sum_max.cases[0] == ("3\n1 2 3\n", "6\n3\n")
    spaced = "n = int(input())\nxs = list(map(int, input().split()))\nprint(' ', sum(xs), ' ')\nprint(max(xs), '')\n"  # fmt: skip
    assert grade(box, sum_max, spaced).all_passed  # whitespace around each line is free
    one_line = "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs), max(xs))\n"
    assert grade(box, sum_max, one_line).passed == 0  # the line structure is not


def test_taco_limits_and_float_answers_come_from_the_record(box: LocalSandbox) -> None:
    mean = problems("taco")[0]
    assert (mean.judging.time_limit, mean.judging.memory_mb) == (1.0, 256)
    precise = "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.12f}')\n"  # fmt: skip
    assert grade(box, mean, precise).all_passed
    rounded = "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.2f}')\n"  # fmt: skip
    assert grade(box, mean, rounded).passed == 1  # 2.33 is off by 3e-3; 1.50 is exact


def test_livecodebench_private_tests_are_unpacked_without_running_pickles() -> None:
    triple, max_sum = problems("livecodebench")
    assert len(triple.cases) == 3 and triple.cases[1][0] == "1000000000000000000\n"
    assert max_sum.calls[1] == ([[5, -1, 4, 4], 3], 13)
    import base64
    import pickle
    import zlib

    class Boom:
        def __reduce__(self) -> tuple:
            return (print, ("pickled code ran",))

    record = json.loads((SAMPLES / "livecodebench.jsonl").read_text().splitlines()[0])
    record["private_test_cases"] = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    with pytest.raises(ValueError, match=r"refused to load builtins\.print"):
        load_problems([record])


def test_mbpp_shows_its_tests_and_grades_through_the_harness(box: LocalSandbox) -> None:
    digits = problems("mbpp")[0]
    assert digits.entry_point == "sum_digits" and "assert sum_digits(1234) == 10" in digits.prompt
    assert grade(box, digits, "def sum_digits(n):\n    return sum(map(int, str(n)))").all_passed


REFUSED = {
    "unknown test type": {
        "problem": "p",
        "tests": json.dumps([{"input": "1", "output": "1", "testtype": "interactive"}]),
    },
    "mixed test types": {
        "problem": "p",
        "tests": json.dumps(
            [
                {"input": "1", "output": "1", "testtype": "stdin"},
                {"input": "1", "output": "1", "testtype": "functional"},
            ]
        ),
        "metadata": {"func_name": "f"},
    },
    "no function name": {
        "problem": "p",
        "tests": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]),
        "metadata": {},
    },
    "not python": {
        "prompt": "p",
        "verification_info": json.dumps({"language": "cpp", "test_cases": []}),
    },
    "inputs without outputs": {
        "question": "q",
        "input_output": json.dumps({"inputs": ["1"], "outputs": []}),
    },
    "no tests": {"problem": "p", "tests": "[]"},
    "cases not text": {"prompt": "p", "inputs": [["1"]], "outputs": ["2"]},
    "bad JSON": {"question": "q", "input_output": "{not json"},
    "call input not a list": {
        "problem": "p",
        "tests": json.dumps([{"type": "function_call", "fn_name": "f", "input": 3, "output": [3]}]),
    },
}


@pytest.mark.parametrize("why", REFUSED)
def test_records_of_no_known_shape_are_refused_at_load_with_one_line(why: str) -> None:
    with pytest.raises(ValueError, match=r"^row 0: ") as caught:
        load_problems([REFUSED[why]])
    assert "\n" not in str(caught.value)


def test_typed_tests_under_palaestras_own_fields_are_not_run_as_stdin() -> None:
    record = {"prompt": "Return x + 1.", "tests": [{"input": "1", "output": "2", "testtype": "functional"}], "metadata": {"func_name": "inc"}}  # fmt: skip
    [problem] = load_problems([record])
    assert (problem.kind, problem.entry_point, problem.calls) == ("call", "inc", [([1], 2)])


def test_rows_of_a_dataset_object_load_too(box: LocalSandbox) -> None:
    rows = [json.loads(line) for line in (SAMPLES / "deepcoder.jsonl").read_text().splitlines()]
    env = palaestra.make("code:Dataset-v0", dataset=rows, sandbox=box)
    obs, _ = env.reset(options={"index": 1})
    assert "class Solution" in obs and "def squares" in obs  # the starter code is shown
    _, reward, *_ = env.step(block("class Solution:\n    def squares(self, nums: List[int]) -> List[int]:\n        return [x * x for x in nums]"))  # fmt: skip
    assert reward == 1.0
