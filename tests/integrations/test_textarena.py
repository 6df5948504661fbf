"""TextArena's offline single-player games as palaestra envs (ids ``textarena:...``)."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import palaestra
from palaestra.testing import check_env, checker

pytest.importorskip("textarena", reason="needs textarena (the 'textarena' extra)")
from palaestra.integrations.textarena import (
    LEFT_OUT,
    OFFLINE_GAMES,
    TextArenaEnv,
    textarena_id_to_palaestra,
)

FAST = [
    "textarena:2048-ultra-easy-v0",
    "textarena:Bandit-v0",
    "textarena:Blackjack-v0",
    "textarena:Crosswords-v0",
    "textarena:FifteenPuzzle-v0",
    "textarena:FrozenLake-random-v0",
    "textarena:GuessTheNumber-v0",
    "textarena:LightsOut-v0",
    "textarena:LogicPuzzle-v0",
    "textarena:Mastermind-v0",
    "textarena:Minesweeper-small-v0",
    "textarena:Secretary-v0",
    "textarena:Slitherlink-v0",
    "textarena:Sudoku-very-easy-v0",
    "textarena:ThreeCardMonte-v0",
]
"""One quick id per game; ``-m slow`` checks every id (Sudoku-hard alone takes a minute)."""


def test_ids_map_textarena_ids_and_leave_out_what_needs_the_network():
    assert textarena_id_to_palaestra("Sudoku-v0-easy") == "textarena:Sudoku-easy-v0"
    assert textarena_id_to_palaestra("2048-v0") == "textarena:2048-v0"
    with pytest.raises(ValueError, match="not a TextArena id"):
        textarena_id_to_palaestra("Sudoku")
    ids = palaestra.list_envs("textarena:*")
    assert sorted(ids) == sorted(textarena_id_to_palaestra(i) for i in OFFLINE_GAMES)
    assert not set(OFFLINE_GAMES) & set(LEFT_OUT)
    assert palaestra.spec("textarena:Sudoku-easy-v0").kwargs == {"ta_id": "Sudoku-v0-easy"}
    assert "textarena:Wordle-v0" not in ids and "textarena:TwentyQuestions-v0" not in ids


def test_ids_load_lazily():
    code = (
        "import sys, palaestra\n"
        "assert 'textarena' not in sys.modules\n"
        "assert not [i for i in palaestra.list_envs() if i.startswith('textarena:')]\n"
        "palaestra.make('textarena:GuessTheNumber-v0')\n"
        "assert 'textarena' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("env_id", FAST)
def test_passes_the_public_env_checker(env_id):
    check_env(env_id)


@pytest.mark.slow
@pytest.mark.parametrize("ta_id", OFFLINE_GAMES)
def test_every_id_passes_the_public_env_checker(ta_id):
    check_env(textarena_id_to_palaestra(ta_id))


def test_binary_search_wins_guess_the_number():
    env = palaestra.make("textarena:GuessTheNumber-v0")
    observation, _ = env.reset(seed=4)
    low, high = map(int, re.search(r"between (\d+) and (\d+)", observation).groups())
    for _ in range(10):
        guess = (low + high) // 2
        observation, reward, terminated, _, info = env.step(f"I guess [{guess}]")
        if terminated:
            break
        low, high = (guess + 1, high) if "higher" in observation else (low, guess - 1)
    assert terminated and info["success"] and reward == 1.0


def test_same_seed_same_episode_and_the_callers_random_state_is_untouched():
    random.seed(123)
    expected = random.Random(123).random()
    transcripts = []
    for _ in range(2):
        env = palaestra.make("textarena:Minesweeper-small-v0")
        first, _ = env.reset(seed=9)
        transcripts.append([first, *(env.step("[2 2]")[0] for _ in range(2))])
    assert transcripts[0] == transcripts[1]
    assert random.random() == expected


def test_two_invalid_moves_end_the_game_and_message_rewards_become_numbers():
    env = palaestra.make("textarena:ThreeCardMonte-v0")  # TextArena hands back its message
    env.reset(seed=0)
    observation, reward, terminated, _, _ = env.step("no idea")
    assert not terminated and "invalid move" in observation
    observation, reward, terminated, _, info = env.step("still no idea")
    assert terminated and reward == 0.0 and isinstance(reward, float)
    assert info["success"] is False and "Bad action" in observation
    assert env.step("[1]")[2] is True  # after the end: over, no error


def test_an_error_inside_textarena_ends_the_episode_instead_of_raising():
    env = TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=0)

    def broken(action):
        raise RuntimeError("boom")

    env.ta_env.step = broken
    observation, reward, terminated, truncated, info = env.step("[3]")
    assert terminated and not truncated and reward == -1.0
    assert "RuntimeError" in observation and "boom" in info["error"] and info["success"] is False


def test_turn_limit_truncates():
    env = TextArenaEnv("2048-v0", max_turns=3)
    env.reset(seed=0)
    results = [env.step(move) for move in ("[up]", "[left]", "[down]")]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["success"] is False


def test_random_actions_are_well_formed_moves():
    env = palaestra.make("textarena:Mastermind-v0")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        observation, *_ = env.step(env.random_action(rng))
        assert "invalid move" not in observation
    checker.check_hostile_actions(lambda: palaestra.make("textarena:Mastermind-v0"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(
        st.text(max_size=200) | st.from_regex(r"\\boxed\{.{0,12}\}|\[.{0,12}\]", fullmatch=True),
        min_size=1,
        max_size=12,
    )
)
def test_fuzzed_actions_never_raise_and_keep_reward_in_range(actions):
    checker.check_hostile_actions(
        lambda: palaestra.make("textarena:Minesweeper-small-v0"), tuple(actions)
    )
