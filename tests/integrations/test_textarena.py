"""TextArena's offline single-player games as palaestra envs (ids ``textarena:...``)."""

from __future__ import annotations

import random
import re
import string
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import palaestra
from palaestra.testing import check_env, checker
from palaestra.testing.degenerate import INVALID, Cheater, check_degenerate, cycle, repeat, sequence

pytest.importorskip("textarena", reason="needs textarena (the 'textarena' extra)")
from palaestra.integrations.textarena import (
    LEFT_OUT,
    OFFLINE_GAMES,
    TextArenaEnv,
    textarena_id_to_palaestra,
)
from palaestra.integrations.textarena_games import ORACLES

FAST = [
    "textarena:Crosswords-v0",
    "textarena:GuessTheNumber-hardcore-v0",
    "textarena:LightsOut-v0",
    "textarena:LogicPuzzle-v0",
    "textarena:Mastermind-v0",
    "textarena:Minesweeper-small-v0",
    "textarena:Secretary-v0",
    "textarena:Set-v0",
    "textarena:Slitherlink-v0",
    "textarena:Sudoku-very-easy-v0",
    "textarena:ThreeCardMonte-v0",
]
"""One quick id per game; ``-m slow`` checks every id (TextArena takes seconds to make a
RushHour or Sokoban level, a minute for Sudoku-hard)."""


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
    assert "textarena:2048-v0" not in ids and "blind" not in LEFT_OUT["2048-v0"]


def test_ids_load_lazily():
    code = (
        "import sys, palaestra\n"
        "assert 'textarena' not in sys.modules\n"
        "assert not [i for i in palaestra.list_envs() if i.startswith('textarena:')]\n"
        "palaestra.make('textarena:GuessTheNumber-hardcore-v0')\n"
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
    env = palaestra.make("textarena:GuessTheNumber-hardcore-v0")
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
    assert terminated and not truncated and reward == 0.0
    assert "RuntimeError" in observation and "boom" in info["error"] and info["success"] is False


def test_turn_limit_truncates():
    env = TextArenaEnv("2048-v0", max_turns=3)
    env.reset(seed=0)
    results = [env.step(move) for move in ("[up]", "[left]", "[down]")]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["success"] is False


@pytest.mark.parametrize("env_id", FAST)
def test_random_actions_are_well_formed_moves(env_id):
    env = palaestra.make(env_id)
    rng = np.random.default_rng(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(6):
            observation, _, terminated, truncated, _ = env.step(env.random_action(rng))
            assert not re.search(r"format|did not respond with", observation, re.I), observation
            if terminated or truncated:
                break
    checker.check_hostile_actions(lambda: palaestra.make(env_id))


@pytest.mark.parametrize("env_id", FAST)
def test_every_game_has_a_system_prompt_that_names_the_move_forms(env_id):
    prompt = palaestra.make(env_id).system_prompt
    assert prompt and "\\boxed{up}" in prompt and "[up]" in prompt


@pytest.mark.parametrize(
    ("action", "sent"),
    [("\\boxed{7}", "[7]"), ("I pick \\boxed{[7]}", "[7]"), ("[7]", "[7]"), ("7", "7")],
)
def test_boxed_moves_reach_the_game_in_square_brackets(action, sent):
    env = TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=0)
    seen = []
    env.ta_env.step = lambda move: (seen.append(move), (False, {}))[1]
    env.step(action)
    assert seen == [sent]


def test_a_boxed_move_plays_like_the_bracketed_one():
    boxed, plain = (
        palaestra.make("textarena:Mastermind-v0"),
        palaestra.make("textarena:Mastermind-v0"),
    )
    assert boxed.reset(seed=3) == plain.reset(seed=3)
    assert boxed.step("\\boxed{1 2 3 4}")[:3] == plain.step("[1 2 3 4]")[:3]


@pytest.mark.parametrize("partial_credit", [False, True])
def test_ending_on_invalid_moves_pays_nothing(partial_credit):
    env = TextArenaEnv("Mastermind-v0", partial_credit=partial_credit)
    env.reset(seed=0)
    env.step("[1 2 3 4]")  # some pegs right: TextArena's partial credit would pay for them
    env.step("garbage")
    _, reward, terminated, _, info = env.step("garbage again")
    assert terminated and reward == 0.0 and info["success"] is False


def test_partial_credit_is_paid_only_when_asked():
    rewards = {}
    for partial_credit in (False, True):
        env = TextArenaEnv("GuessTheNumber-v0", partial_credit=partial_credit)
        env.reset(seed=1)
        wrong = [n for n in range(1, 21) if n != env.ta_env.game_number]
        for guess in wrong:  # a lost game: close guesses earn TextArena's partial credit
            _, rewards[partial_credit], terminated, _, info = env.step(f"[{guess}]")
            if terminated:
                break
        assert terminated and info["success"] is False
    assert rewards[False] == 0.0 and 0.0 < rewards[True] < 1.0


def test_every_adapted_game_has_an_oracle():
    assert {TextArenaEnv(ta_id).game for ta_id in OFFLINE_GAMES} <= set(ORACLES)


@pytest.mark.slow
def test_textarena_prints_go_to_the_log_not_stdout(capfd):
    env = palaestra.make("textarena:RushHour-v0")
    env.reset(seed=0)
    env.step(env.random_action(np.random.default_rng(0)))
    assert capfd.readouterr().out == ""


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


def _raw(*moves: str) -> Cheater:
    return cycle(*moves, box=False)


CHEATERS: dict[str, dict[str, Cheater]] = {
    "Crosswords": {
        "one letter everywhere": sequence(
            lambda t: " ".join(f"[{r} {c} E]" for r in range(8) for c in range(8))
        ),
        "every letter at once": repeat(" ".join(f"[0 0 {ch}]" for ch in string.ascii_uppercase)),
    },
    "GuessTheNumber": {
        "count up": sequence(lambda t: f"[{1 + t}]"),
        "always 10": _raw("[10]"),
        "list": _raw("[1] [2] [3] [4] [5]"),
    },
    "LightsOut": {
        "scan": sequence(lambda t: f"[{t // 5 % 5} {t % 5}]"),
        "always the centre": _raw("[2 2]"),
        "list": _raw("[0 0] [1 1] [2 2]"),
    },
    "LogicPuzzle": {"always one mark": _raw("[pizza alice O]"), "list": _raw("[a b O] [c d X]")},
    "Mastermind": {
        "one colour": sequence(lambda t: "[" + " ".join([str(1 + t % 6)] * 4) + "]"),
        "always 1234": _raw("[1 2 3 4]"),
        "list": _raw("[1 2 3 4] [2 3 4 5]"),
    },
    "Minesweeper": {
        "scan": sequence(lambda t: f"[{t // 8 % 8} {t % 8}]"),
        "always 2 2": _raw("[2 2]"),
        "list": _raw("[0 0] [0 1] [1 0]"),
    },
    "RushHour": {"always X+": _raw("[X+]"), "cycle": _raw("[A+]", "[B+]", "[X+]", "[A-]", "[B-]")},
    "Secretary": {
        "accept": _raw("[accept]"),
        "never accept": _raw("[continue]"),
        "accept the 4th": _raw("[continue]", "[continue]", "[continue]", "[accept]"),
    },
    "Set": {
        "scan": sequence(lambda t: f"[{1 + t % 10}, {2 + t % 10}, {3 + t % 10}]"),
        "always 1 2 3": _raw("[1, 2, 3]"),
        "list": _raw("[1, 2, 3] [4, 5, 6]"),
    },
    "Slitherlink": {
        "scan": sequence(lambda t: f"[h {t // 4 % 5} {t % 4}]"),
        "always one edge": _raw("[h 0 0]"),
    },
    "Sokoban": {
        "up-left-down-right": _raw("[up]", "[left]", "[down]", "[right]"),
        "down-right": _raw("[down]", "[right]"),
    },
    "Sudoku": {
        "scan": sequence(lambda t: f"[{1 + t // 9 % 9} {1 + t % 9} {1 + t % 9}]"),
        "always 1 1 1": _raw("[1 1 1]"),
        "list": _raw("[1 1 1] [1 2 2]"),
    },
    "ThreeCardMonte": {
        "always 0": _raw("[0]"),
        "always 1": _raw("[1]"),
        "list": _raw("[0] [1] [2]"),
    },
}


def test_every_adapted_game_has_its_cheaters():
    assert {TextArenaEnv(ta_id).game for ta_id in OFFLINE_GAMES} == set(CHEATERS)


LONG_EPISODES = {"Slitherlink", "Sudoku"}


@pytest.mark.parametrize("env_id", FAST)
def test_degenerate_strategies_do_not_beat_random_play(env_id):
    game = palaestra.make(env_id).unwrapped.game
    seeds = range(15 if game in LONG_EPISODES else 60)
    check_degenerate(env_id, {"invalid text": INVALID, **CHEATERS[game]}, seeds=seeds)


SLOW_TO_MAKE = {"RushHour-v0", "Sokoban-v0", "Sudoku-v0-medium", "Sudoku-v0-hard"}
"""TextArena takes seconds (Sudoku-hard: up to minutes) to generate one of these."""


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("ta_id", OFFLINE_GAMES)
def test_degenerate_strategies_lose_on_every_id(ta_id):
    env_id = textarena_id_to_palaestra(ta_id)
    game = palaestra.make(env_id).unwrapped.game
    seeds = range(20 if ta_id in SLOW_TO_MAKE else 100)
    check_degenerate(env_id, {"invalid text": INVALID, **CHEATERS[game]}, seeds=seeds)
