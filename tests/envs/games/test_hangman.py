"""Hangman: letters and whole words, lives, the candidate-frequency oracle, shaping."""

from __future__ import annotations

import pytest

from palaestra.envs.games.hangman import Hangman
from palaestra.testing import play


@pytest.mark.parametrize(("difficulty", "floor"), [("easy", 0.97), ("medium", 0.75), ("hard", 0.6)])
def test_oracle_win_rate(difficulty, floor):
    env = Hangman(difficulty)
    assert not env.oracle_always_wins
    wins = sum(play(env, seed)[-1][5] is True for seed in range(100))
    random_wins = sum(play(env, seed, "random")[-1][5] is True for seed in range(50))
    assert wins >= 100 * floor and wins > 2 * random_wins + 40


def test_candidates_always_hold_the_secret():
    env = Hangman("hard")
    for seed in range(30):
        env.reset(seed=seed)
        oracle, done = env.oracle(), False
        while not done:
            assert env.secret in env.candidates()
            *_, done, _, _ = env.step(oracle(""))


def test_letters_words_lives_and_garbage():
    env = Hangman("medium", lives=3, max_turns=10)
    env.reset(seed=0)
    secret = env.secret
    hit = secret[0]
    miss = next(ch for ch in "zqxjkvwy" if ch not in secret)
    observation = env.step(f"\\boxed{{{hit}}}")[0]
    assert "is in the word" in observation and "Lives left: 3   Turns left: 9" in observation
    observation = env.step(f"\\boxed{{{hit}}}")[0]  # a repeated letter costs a life
    assert "already guessed" in observation and "Lives left: 2   Turns left: 8" in observation
    for garbage in ["\\boxed{12}", "", "\\boxed{ab}", "\x00" * 5]:
        observation, reward, terminated, *_ = env.step(garbage)
        assert not terminated and reward == 0.0 and "Lives left: 2" in observation
    assert "not in the word" in env.step(f"\\boxed{{{miss}}}")[0]
    wrong_word = "zzzzz" if secret != "zzzzz" else "yyyyy"
    observation, reward, terminated, _, info = env.step(f"\\boxed{{{wrong_word}}}")
    assert terminated and info["success"] is False and secret in observation


def test_guessing_the_word_wins():
    env = Hangman("hard")
    env.reset(seed=4)
    _, reward, terminated, _, info = env.step(f"\\boxed{{{env.secret.upper()}}}")
    assert terminated and info["success"] and reward == 1.0


def test_shaping_sums_to_its_weight_over_any_win():
    env = Hangman("easy", shaping=0.5)
    for seed in range(20):
        transcript = play(env, seed)
        if transcript[-1][5]:
            assert sum(step[2] for step in transcript[1:]) == pytest.approx(1.5)
