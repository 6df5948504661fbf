"""Mastermind: peg scoring, the consistent-code oracle, rules, shaping."""

from __future__ import annotations

import numpy as np
import pytest

from palaestra.envs.games.mastermind import Mastermind, code_table, consistent_with, score
from palaestra.testing import play


@pytest.mark.parametrize(
    ("guess", "secret", "pegs"),
    [
        ((1, 2, 3, 4), (1, 2, 3, 4), (4, 0)),
        ((4, 3, 2, 1), (1, 2, 3, 4), (0, 4)),
        ((1, 1, 2, 2), (1, 2, 1, 3), (1, 2)),
        ((1, 1, 1, 1), (1, 2, 3, 4), (1, 0)),  # one 1 in the secret: one peg, not four
        ((5, 5, 6, 6), (1, 2, 3, 4), (0, 0)),
    ],
)
def test_score_counts_repeated_colours_once(guess, secret, pegs):
    assert score(guess, secret) == pegs


def test_vectorised_filter_agrees_with_scoring_every_code():
    codes, _ = code_table(4, 6)
    rng = np.random.default_rng(0)
    for _ in range(20):
        guess, secret = (tuple(int(c) for c in rng.integers(1, 7, size=4)) for _ in range(2))
        pegs = score(guess, secret)
        kept = consistent_with(np.arange(len(codes)), guess, pegs, 4, 6)
        expected = [i for i, code in enumerate(codes) if score(guess, tuple(code)) == pegs]
        assert kept.tolist() == expected


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_wins_every_seed_within_the_turn_limit(difficulty):
    env = Mastermind(difficulty)
    for seed in range(100):
        assert play(env, seed)[-1][5] is True, seed


def test_bad_guesses_cost_a_turn():
    env = Mastermind("easy", max_turns=4)
    env.reset(seed=0)
    for action in [
        r"\boxed{12}",
        r"\boxed{129}",
        r"\boxed{abc}",
        "I give up and write a long essay instead",
    ]:
        observation, reward, terminated, _, info = env.step(action)
        assert reward == 0.0
    assert terminated and info["success"] is False and "the code was" in observation


def test_guess_spellings():
    env = Mastermind("medium")
    env.reset(seed=1)
    assert "black" in env.step(r"\boxed{1 2 3 4}")[0]
    assert "black" in env.step("1,2,3,4")[0]


def test_shaping_sums_to_its_weight_over_any_win():
    env = Mastermind("medium", shaping=0.5, max_turns=30)
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        oracle, total, done = env.oracle(), 0.0, False
        for turn in range(30):
            action = env.random_action(rng) if turn < 3 else oracle("")
            _, reward, done, _, info = env.step(action)
            total += reward
            if done:
                break
        assert info["success"] and total == pytest.approx(1.5)
