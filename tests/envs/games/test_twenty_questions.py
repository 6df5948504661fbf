"""Twenty questions: the knowledge base, the judge, the halving oracle, shaping."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import palaestra
from palaestra.envs.games.twenty_questions import (
    NO,
    UNKNOWN,
    YES,
    TwentyQuestions,
    knowledge_base,
)

IDS = ["game:TwentyQuestions-Easy-v0", "game:TwentyQuestions-v0", "game:TwentyQuestions-Hard-v0"]


def play(env, policy, observation=""):
    """Play to the end; the sum of the rewards and the last info."""
    total = 0.0
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation))
        total += reward
        if terminated or truncated:
            return total, info


def test_the_knowledge_base_is_large_and_every_entity_is_distinguishable():
    kb = knowledge_base()
    assert len(kb.entities) >= 300 and len(kb.questions) >= 60
    assert len(set(kb.categories.values())) >= 15
    for a, b in itertools.combinations(kb.entities, 2):
        assert any(
            kb.answers[a][k] != kb.answers[b][k]
            and UNKNOWN not in (kb.answers[a][k], kb.answers[b][k])
            for k in kb.questions
        ), f"{a} and {b} give the same known answers"


def test_the_judge_answers_from_the_knowledge_base():
    kb = knowledge_base()
    assert kb.answers["penguin"]["bird"] == YES and kb.answers["penguin"]["flies"] == UNKNOWN
    assert kb.answers["bench"]["indoors"] == NO  # '-indoors' overrides the furniture default
    assert kb.answers["whale"]["fish"] == NO and kb.answers["whale"]["mammal"] == YES
    env = TwentyQuestions()
    env.reset(seed=0)
    env.secret = "penguin"
    assert env.step("\\boxed{Is it a bird?}")[0].startswith("Is it a bird? Yes.")
    assert env.step("\\boxed{Can it fly?}")[0].startswith("Can it fly? I don't know.")
    number = list(kb.questions).index("mammal") + 1
    assert env.step(f"\\boxed{{{number}}}")[0].startswith("Is it a mammal? No.")
    _, reward, terminated, _, info = env.step("\\boxed{guess: Penguin}")
    assert terminated and reward == 1.0 and info["success"]


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_100_seeded_episodes(env_id):
    env = palaestra.make(env_id)
    for seed in range(100):
        env.reset(seed=seed)
        reward, info = play(env, env.oracle())
        assert reward == 1.0 and info["success"], (env_id, seed)


def test_oracle_finds_every_entity_within_the_hard_limit():
    env = TwentyQuestions("hard")
    for entity in knowledge_base().entities:
        env.reset(seed=0)
        env.secret = entity
        reward, info = play(env, env.oracle())
        assert reward == 1.0, entity
        assert info["metrics"]["turns"] <= 13


def test_same_seed_same_secret_and_easy_names_the_group():
    a, b = palaestra.make(IDS[0]), palaestra.make(IDS[0])
    for seed in range(20):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.unwrapped.secret == b.unwrapped.secret
    secrets = {a.reset(seed=s)[0] and a.unwrapped.secret for s in range(50)}
    assert len(secrets) > 30
    observation, _ = a.reset(seed=0)
    assert "It is " in observation.split("\n")[0]
    assert "It is " not in palaestra.make(IDS[1]).reset(seed=0)[0].split("\n")[0]


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("", "I can only answer the listed questions"),
        ("\\boxed{Is it furry?}", "I can only answer the listed questions"),
        ("\\boxed{999}", "There is no question 999"),
        ("x" * 100_000, "I can only answer the listed questions"),
    ],
)
def test_bad_moves_cost_a_turn_and_say_why(action, expected):
    env = TwentyQuestions()
    env.reset(seed=0)
    env.secret = "cat"
    observation, reward, terminated, truncated, _ = env.step(action)
    assert expected in observation and "19 turns left" in observation
    assert reward == 0.0 and not (terminated or truncated)


@pytest.mark.parametrize(
    "action",
    ["\\boxed{guess: unicorn}", "\\boxed{Is it a dog?}", "dogs", "\\boxed{guess: cat, dog}"],
)
def test_a_wrong_guess_ends_the_game(action):
    env = TwentyQuestions()
    env.reset(seed=0)
    env.secret = "cat"
    observation, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 0.0 and info["success"] is False
    assert observation.startswith("No, it is not") and "it was cat" in observation


@pytest.mark.parametrize(
    ("secret", "action"),
    [
        ("pencil", "\\boxed{guess: a pencil}"),
        ("pencil", "\\boxed{guess: pencils}"),
        ("pencil", "Pencils"),
        ("strawberry", "\\boxed{guess: the strawberries}"),
        ("peas", "\\boxed{guess: pea}"),
        ("polar bear", "\\boxed{Is it a polar bear?}"),
        ("polar bear", "\\boxed{guess: polar bears}"),
    ],
)
def test_guesses_name_things_in_the_singular_or_plural_with_or_without_article(secret, action):
    env = TwentyQuestions()
    env.reset(seed=0)
    env.secret = secret
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 1.0 and info["success"] is True


def test_turn_limit_ends_with_the_secret():
    env = TwentyQuestions("hard")
    env.reset(seed=3)
    for _ in range(13):
        assert not env.step("\\boxed{1}")[2]
    observation, reward, terminated, _, info = env.step("\\boxed{1}")
    assert terminated and reward == 0.0 and env.unwrapped.secret in observation
    assert info["success"] is False


def test_shaping_sums_to_its_weight_over_a_win_and_pays_for_information():
    env = TwentyQuestions(shaping=0.5)
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        total = 0.0
        for _ in range(3):
            _, reward, *_ = env.step(env.random_action(rng))
            total += reward
        reward, _ = play(env, env.oracle())
        assert total + reward == pytest.approx(1.5)
    env.reset(seed=0)
    before = len(env.candidates)
    _, reward, *_ = env.step("\\boxed{Is it an animal?}")
    expected = -0.5 * (math.log(len(env.candidates)) - math.log(before)) / math.log(before)
    assert reward == pytest.approx(expected) and reward > 0
