"""QA, format, noise and rubric rewards, and their TRL adapter (palaestra.integrations.trl)."""

from __future__ import annotations

import asyncio
import doctest
import importlib

import numpy as np
import pytest

from palaestra.core.wrappers import flip_reward
from palaestra.integrations.trl import as_trl_reward, completion_text
from palaestra.verifiers import format as fmt
from palaestra.verifiers import qa
from palaestra.verifiers.extract import answer_phrase, extract_answer, last_number, last_tagged
from palaestra.verifiers.noise import NoisyReward, reasoning_pattern_reward
from palaestra.verifiers.rubric import RewardComponent, Rubric


@pytest.mark.parametrize("module", ["extract", "qa", "format", "noise", "rubric", "worker", "math"])
def test_docstring_examples(module: str):
    if module in ("math", "rubric"):
        pytest.importorskip("math_verify", reason="needs the 'math' extra")
    result = doctest.testmod(importlib.import_module(f"palaestra.verifiers.{module}"))
    assert result.attempted > 0 and result.failed == 0


# --- extraction ---------------------------------------------------------------------------


def test_extraction_strategies():
    assert last_tagged("<answer>a</answer><answer>b</answer>") == "b"
    assert last_tagged("<answer>never closed") is None
    assert answer_phrase("Thus the answer is 3.5 apples. Next") == "3.5 apples"
    assert answer_phrase("no phrase here") is None
    assert last_number("between -3 and 7/8.") == "7/8"
    assert last_number("no digits") is None
    assert extract_answer(r"the answer is 3 but \boxed{4}") == "4"
    assert extract_answer("<answer>B</answer> and the answer is C") == "B"


# --- qa -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "gold", "em"),
    [
        ("Paris", "paris", 1.0),
        ("The Beatles", "Beatles", 1.0),
        ("Beatles!", "the beatles", 1.0),
        ("  new   york ", "New York", 1.0),
        ("New York City", "New York", 0.0),
        ("London", ["Paris", "London"], 1.0),
        ("", "Paris", 0.0),
    ],
)
def test_exact_match(prediction, gold, em):
    assert qa.exact_match(prediction, gold) == em


def test_token_f1():
    assert qa.token_f1("New York City", "New York") == pytest.approx(0.8)
    assert qa.token_f1("Chicago", "New York") == 0.0
    assert qa.token_f1("a the", "the") == 1.0  # both normalize to nothing
    assert qa.token_f1("new york", ["boston", "new york"]) == 1.0


def test_qa_verify_extracts_the_answer():
    completion = "<think>it is the capital</think><answer>Paris</answer>"
    assert qa.verify(completion, "paris") == 1.0
    assert qa.verify(r"I think \boxed{Lyon}", "Paris") == 0.0
    # the F1 reward does not pay for extra words: min(precision 1/2, recall 1), not F1's 2/3
    assert qa.verify("<answer>Paris France</answer>", "Paris", metric="f1") == 0.5
    with pytest.raises(ValueError, match="metric"):
        qa.verify("x", "x", metric="bleu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        qa.exact_match("x", [])


# --- format ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think><answer>b</answer>", 1.0),
        ("<think>a</think>\n <answer>b</answer>\n", 1.0),
        ("<answer>b</answer><think>a</think>", 0.0),
        ("hello <think>a</think><answer>b</answer>", 0.0),
        ("<think>a</think><answer>b</answer> bye", 0.0),
        ("<think>a</think><think>a</think><answer>b</answer>", 0.0),
        ("<think>a<answer>b</answer></think>", 0.0),
        ("<think>a</think>", 0.0),
        ("</think>a<think><answer>b</answer>", 0.0),
    ],
)
def test_tag_structure(text, expected):
    assert fmt.tag_structure(text) == expected


def test_tag_structure_options():
    swapped = "<answer>b</answer><think>a</think>"
    assert fmt.tag_structure(swapped, ordered=False) == 1.0
    assert fmt.tag_structure("intro <answer>b</answer>", ["answer"], exclusive=False) == 1.0
    assert fmt.tag_fraction("<think>a</think> no answer") == 0.5
    with pytest.raises(ValueError, match="at least one tag"):
        fmt.tag_structure("x", [])


def test_length_penalties():
    assert fmt.overlong_penalty(900, max_length=1000, buffer=100) == 0.0
    assert fmt.overlong_penalty(975, max_length=1000, buffer=100) == pytest.approx(-0.75)
    assert fmt.overlong_penalty(1001, max_length=1000, buffer=100) == -1.0
    assert fmt.token_budget(1.0, 512, 512) == 1.0
    assert fmt.token_budget(1.0, 513, 512) == 0.0
    assert fmt.token_budget(1.0, 513, 512, over_budget=-0.5) == -0.5
    assert fmt.length_penalty(50, target=100) == 0.0
    assert fmt.length_penalty(150, target=100, scale=0.2) == pytest.approx(-0.1)
    assert fmt.length_penalty(10_000, target=100) == -1.0
    with pytest.raises(ValueError, match="buffer"):
        fmt.overlong_penalty(5, max_length=10, buffer=20)
    with pytest.raises(ValueError, match="budget"):
        fmt.token_budget(1.0, 5, 0)


# --- noise ----------------------------------------------------------------------------------


def test_flip_semantics_match_the_env_wrapper():
    assert flip_reward(1.0, (0.0, 1.0)) == 0.0
    assert flip_reward(0.25, (0.0, 1.0)) == 0.75
    assert flip_reward(-1.0, (-1.0, 1.0)) == 1.0


def test_noisy_reward_flips_at_the_requested_rate():
    noisy = NoisyReward(lambda completion: 1.0, p=0.3, seed=123)
    values = np.array([noisy("x") for _ in range(4000)])
    assert set(values) == {0.0, 1.0}
    assert abs((values == 0.0).mean() - 0.3) < 0.03
    assert noisy.last_clean == 1.0


def test_noisy_reward_is_reproducible_and_bounded():
    def run(seed: int, clean: float = 1.0) -> list[float]:
        noisy = NoisyReward(lambda c: clean, p=0.5, seed=seed, bounds=(-1.0, 1.0))
        return [noisy("x") for _ in range(50)]

    assert run(7) == run(7)
    assert run(7) != run(8)
    assert set(run(7)) == {-1.0, 1.0}
    assert set(run(7, clean=0.0)) == {0.0}  # 0 is its own mirror image in [-1, 1]
    never = NoisyReward(lambda c: 1.0, p=0.0, seed=0)
    assert all(never("x") == 1.0 for _ in range(100))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        NoisyReward(lambda c: 1.0, p=1.5)


def test_reasoning_pattern_reward():
    text = "First, I need to add. Wait, let me check the sum. Therefore 4."
    assert reasoning_pattern_reward(text, target=3) == 1.0
    assert reasoning_pattern_reward("The sum is 4.", target=3) == 0.0
    assert reasoning_pattern_reward("Wait. WAIT.", target=2) == 0.5  # distinct phrases count
    assert reasoning_pattern_reward("alpha beta", phrases=["alpha", "beta"], target=2) == 1.0


# --- rubric ---------------------------------------------------------------------------------


def _contains_gold(completion: str, gold: str) -> float:
    return float(gold in completion)


def _short(completion: str) -> float:
    return float(len(completion) < 10)


def _turns(completions: list[str]) -> float:
    return float(len(completions))


def test_rubric_weights_and_logs_each_component():
    rubric = Rubric(
        [RewardComponent("correct", _contains_gold), RewardComponent("short", _short, 0.5)]
    )
    result = rubric.score("answer 42", gold="42", unused_context="ignored")
    assert result.total == 1.5
    assert result.components == {"correct": 1.0, "short": 1.0}
    assert result.metrics() == {"reward/total": 1.5, "reward/correct": 1.0, "reward/short": 1.0}
    assert rubric("a much longer answer 41", gold="42") == 0.0


def test_rubric_per_episode():
    rubric = Rubric(
        [
            RewardComponent("correct", _contains_gold),
            RewardComponent("turns", _turns, weight=-0.1, scope="episode"),
        ]
    )
    result = rubric.score_episode(["41", "42", "43"], gold="42")
    assert result.components == {"correct": pytest.approx(1 / 3), "turns": 3.0}
    assert result.total == pytest.approx(1 / 3 - 0.3)
    last = Rubric([RewardComponent("correct", _contains_gold)], turn_reduce="last")
    assert last.score_episode(["41", "42"], gold="42").total == 1.0
    with pytest.raises(ValueError, match="no turn components"):
        Rubric([RewardComponent("turns", _turns, scope="episode")]).score("x")


async def _async_gold(completion: str, gold: str) -> float:
    await asyncio.sleep(0)
    return float(completion.endswith(gold))


def test_rubric_async_components():
    rubric = Rubric([RewardComponent("async", _async_gold), RewardComponent("short", _short)])
    result = asyncio.run(rubric.ascore("is 42", gold="42"))
    assert result.components == {"async": 1.0, "short": 1.0}
    episode = asyncio.run(rubric.ascore_episode(["is 41", "is 42"], gold="42"))
    assert episode.components == {"async": 0.5, "short": 1.0}
    with pytest.raises(TypeError, match="ascore"):
        rubric.score("is 42", gold="42")


def test_rubric_rejects_bad_definitions():
    with pytest.raises(ValueError, match="at least one"):
        Rubric([])
    with pytest.raises(ValueError, match="unique"):
        Rubric([RewardComponent("a", _short), RewardComponent("a", _short)])
    with pytest.raises(ValueError, match="scope"):
        RewardComponent("a", _short, scope="game")  # type: ignore[arg-type]


# --- trl adapter ----------------------------------------------------------------------------


def test_trl_adapter_plain_and_conversational():
    reward = as_trl_reward(qa.verify)
    plain = reward(prompts=["q1", "q2"], completions=["Paris", "Rome"], answer=["paris", "paris"])
    assert plain == [1.0, 0.0]
    chat = [[{"role": "assistant", "content": "<answer>Paris</answer>"}], []]
    assert reward(completions=chat, answer=["Paris", "Paris"], extra_column=[1, 2]) == [1.0, 0.0]
    assert reward.__name__ == "verify"


def test_trl_adapter_column_map_and_rubric():
    rubric = Rubric([RewardComponent("correct", _contains_gold)])
    reward = as_trl_reward(rubric, column_map={"target": "gold"}, name="rubric_reward")
    assert reward(completions=["x 7", "x 8"], target=["7", "7"]) == [1.0, 0.0]
    assert reward.__name__ == "rubric_reward"
    assert (
        completion_text([{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])
        == "hi"
    )
    with pytest.raises(TypeError, match="sync"):
        as_trl_reward(_async_gold)
