"""Procedural math envs, the dataset env, and the retry protocol."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import palaestra
from palaestra.envs.math.dataset import MathDataset
from palaestra.envs.math.procedural import Arithmetic, Fractions, LinearEquation, _evaluate
from palaestra.tasks.files import load_records

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

MATH_IDS = [
    i for i in palaestra.list_envs("math:*") if "-Python-" not in i
]  # tool variants: test_tool_math.py


def test_ids_are_registered():
    for name in ("Arithmetic", "Fractions", "LinearEquation", "WordProblem"):
        for suffix in ("", "-Easy", "-Hard", "-Retry"):
            assert f"math:{name}{suffix}-v0" in MATH_IDS
    assert "math:Dataset-v0" in MATH_IDS


@pytest.mark.parametrize("env_id", MATH_IDS)
def test_env_checker_and_oracle(env_id: str):
    env = palaestra.make(env_id)
    check_env(env, skip_render_check=True)
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        assert info["role"] == "user" and obs
        _, reward, terminated, truncated, info = env.step(env.oracle()(obs))
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


@pytest.mark.parametrize("env_id", MATH_IDS)
def test_same_seed_same_problem(env_id: str):
    a, b = palaestra.make(env_id), palaestra.make(env_id)
    assert a.reset(seed=3)[0] == b.reset(seed=3)[0]
    questions = {a.reset(seed=s)[0] for s in range(20)}
    assert len(questions) > 5


@pytest.mark.parametrize("action", ["", "garbage", "\\boxed{", "x" * 1_000_000, "\\boxed{-999999}"])
def test_bad_answers_end_the_episode_with_zero(action: str):
    env = palaestra.make("math:Arithmetic-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)
    assert "expected answer" in obs


def test_retry_gives_feedback_then_accepts_a_correct_answer():
    env = palaestra.make("math:LinearEquation-Retry-v0")
    obs, _ = env.reset(seed=1)
    obs, reward, terminated, _, info = env.step("\\boxed{no idea}")
    assert (reward, terminated) == (0.0, False)
    assert "2 attempts left" in obs and "success" not in info
    obs, reward, terminated, _, info = env.step(env.oracle()(obs))
    assert (terminated, info["success"]) == (True, True)
    assert reward == pytest.approx(0.9)  # the second attempt costs 0.1
    assert info["metrics"]["attempts"] == 2.0


def test_retry_runs_out_of_attempts():
    env = palaestra.make("math:Fractions-Retry-v0")
    env.reset(seed=0)
    results = [env.step("\\boxed{0.123456}") for _ in range(3)]
    assert [r[2] for r in results] == [False, False, True]
    assert results[-1][4]["success"] is False
    assert env.step("\\boxed{1}")[2] is True  # after the end: still over, no crash


def test_difficulty_changes_the_problems():
    easy, hard = Arithmetic("easy"), Arithmetic("hard")
    easy.reset(seed=0)
    hard.reset(seed=0)
    assert len(hard.problem.prompt) > len(easy.problem.prompt)
    assert all(int(t) <= 20 for t in easy.problem.data["expression"].split() if t.isdigit())


def test_knobs_override_presets_and_are_validated():
    env = Arithmetic("easy", num_terms=6)
    env.reset(seed=0)
    assert env.problem.data["expression"].count(" ") == 10  # 6 numbers, 5 operators
    with pytest.raises(TypeError, match="unknown Arithmetic knobs"):
        Arithmetic(num_termz=3)
    with pytest.raises(ValueError, match="unknown difficulty"):
        Fractions("impossible")
    with pytest.raises(ValueError, match="max_coefficient"):
        LinearEquation(max_coefficient=1)


def test_expression_evaluator_respects_precedence():
    assert _evaluate("2 + 3 * 4") == 14
    assert _evaluate("(2 + 3) * 4") == 20
    assert _evaluate("10 - 4 - 3") == 3
    assert _evaluate("((1 - 2) * 3) + 4 * 5") == 17


def test_fractions_answers_match_their_question():
    rng = np.random.default_rng(0)
    for seed in rng.integers(0, 10_000, size=20):
        env = Fractions("hard")
        env.reset(seed=int(seed))
        assert (
            palaestra.verifiers.math.verify(
                "\\boxed{" + str(env.problem.data["value"]) + "}", env.problem.answer
            )
            == 1.0
        )


# --- dataset env --------------------------------------------------------------------------


def test_dataset_env_reads_jsonl_with_custom_fields(tmp_path):
    path = tmp_path / "probs.jsonl"
    rows = [{"problem": "1+1?", "solution": "so \\boxed{2}"}, {"problem": "2+2?", "solution": "4"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = MathDataset(
        path, question_field="problem", answer_field="solution", prompt_template="Q: {question}"
    )
    obs, _ = env.reset(options={"index": 0})
    assert obs == "Q: 1+1?"
    assert env.step("\\boxed{2}")[1] == 1.0
    env.reset(options={"index": 1})
    assert env.step("The answer is 5.")[1] == 0.0


def test_dataset_env_reads_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="needs the 'datasets' extra")
    import pyarrow.parquet as pq

    path = tmp_path / "probs.parquet"
    pq.write_table(pa.table({"question": ["3*3?"], "answer": ["9"]}), path)
    env = MathDataset(path)
    env.reset(seed=0)
    assert env.step("\\boxed{9}")[1] == 1.0


def test_dataset_env_accepts_a_hf_datasets_object():
    datasets = pytest.importorskip("datasets", reason="needs the 'datasets' extra")
    data = datasets.Dataset.from_dict({"q": ["half of 1?"], "a": ["\\frac{1}{2}"]})
    env = MathDataset(dataset=data, question_field="q", answer_field="a")
    env.reset(seed=0)
    assert env.step("<answer>0.5</answer>")[1] == 1.0


def test_dataset_env_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="exactly one of"):
        MathDataset()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        MathDataset(tmp_path / "missing.jsonl").reset(seed=0)
    env = MathDataset(dataset=[{"question": "?"}])
    with pytest.raises(ValueError, match=r"row 0: no field 'answer' .*set answer_field="):
        env.reset(seed=0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": 1}\n{oops\n')
    with pytest.raises(ValueError, match="line 2"):
        load_records(bad)
    with pytest.raises(ValueError, match="unsupported"):
        load_records(bad.rename(tmp_path / "bad.csv"))


def test_make_is_cheap_and_data_loads_at_reset(tmp_path):
    env = palaestra.make("math:Dataset-v0", path=str(tmp_path / "not-there.jsonl"))
    with pytest.raises(FileNotFoundError):
        env.reset(seed=0)
