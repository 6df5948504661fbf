"""TextWorld quests generated on this machine, as palaestra envs (ids ``textworld:...``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import palaestra
from palaestra.testing import check_env, checker, play
from palaestra.testing.degenerate import INVALID, check_degenerate, cycle, repeat

pytest.importorskip("textworld", reason="needs textworld (the 'textworld' extra)")
from palaestra.integrations.textworld import clean_feedback, game_file

IDS = [
    f"textworld:{name}{variant}-v0"
    for name in ("Quest", "CoinCollector", "TreasureHunter", "Simple")
    for variant in ("-Easy", "", "-Hard")
]


def test_ids_load_lazily():
    code = (
        "import sys, palaestra\n"
        "assert 'textworld' not in sys.modules\n"
        "assert not [i for i in palaestra.list_envs() if i.startswith('textworld:')]\n"
        "assert len(palaestra.list_envs('textworld:*')) == 12\n"
        "assert 'textworld' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert sorted(palaestra.list_envs("textworld:*")) == sorted(IDS)


def test_quest_passes_the_public_env_checker():
    check_env("textworld:Quest-Easy-v0", games=2)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_every_id_passes_the_public_env_checker(env_id):
    check_env(env_id, games=2)


def test_games_are_generated_once_and_the_same_from_the_same_seed(tmp_path, monkeypatch):
    settings = {"nb_rooms": 3, "nb_objects": 6, "quest_length": 3}
    first = game_file("quest", settings, 5)
    modified = first.stat().st_mtime_ns
    assert game_file("quest", settings, 5) == first and first.stat().st_mtime_ns == modified
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path))
    again = game_file("quest", settings, 5)
    assert again != first and str(again).startswith(str(tmp_path))
    assert again.with_suffix(".json").read_text() == first.with_suffix(".json").read_text()
    assert not list(tmp_path.rglob("*.tmp.*")) and not list(tmp_path.rglob("*.ni"))


def test_oracle_wins_and_rewards_sum_to_one():
    env = palaestra.make("textworld:Simple-Easy-v0", games=1)  # dense rewards on the way
    transcript = play(env, seed=0)
    rewards = [step[2] for step in transcript[1:]]
    assert transcript[-1][5] is True and sum(rewards) == pytest.approx(1.0)
    assert sum(r > 0 for r in rewards) > 1


def test_interpreter_commands_and_backslashes_are_refused_and_the_game_goes_on():
    env = palaestra.make("textworld:Quest-Easy-v0", games=2)
    observation, info = env.reset(seed=1)
    assert "go" in " ".join(info["admissible_commands"])
    for action in ("quit", "RESTART", "save", "undo", "\\help"):
        observation, reward, terminated, truncated, _ = env.step(action)
        assert not (terminated or truncated) and reward == 0.0
    assert "not available" in env.step("restore")[0]
    assert "Give a command" in env.step("\\")[0]
    oracle, done = env.oracle(), False
    while not done:
        observation, reward, terminated, truncated, info = env.step(oracle(observation))
        done = terminated or truncated
    assert info["success"] is True


def test_turn_limit_truncates():
    env = palaestra.make("textworld:Quest-Easy-v0", games=2, max_turns=2)
    env.reset(seed=0)
    assert env.step("look")[3] is False
    _, _, terminated, truncated, info = env.step("look")
    assert truncated and not terminated and info["success"] is False


def test_clean_feedback_drops_banner_prompt_and_status_line():
    raw = (
        "\n\n  ___ \n | $$ \\$$ /$$ \n\nWelcome! Take the key.\n\n-= Attic =-\nDusty.\n\n\n\n"
        ">                                           -= Attic =-0/1"
    )
    assert clean_feedback(raw) == "Welcome! Take the key.\n\n-= Attic =-\nDusty."


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
        lambda: palaestra.make("textworld:Quest-Easy-v0", games=2), tuple(actions)
    )


def test_a_system_prompt_and_boxed_commands():
    env = palaestra.make("textworld:Quest-Easy-v0", games=2)  # the games the checker made
    assert "\\boxed{go north}" in env.system_prompt
    observation, _ = env.reset(seed=0)
    oracle, done = env.oracle(), False
    while not done:
        command = oracle(observation)
        observation, _, terminated, truncated, info = env.step(f"I will \\boxed{{{command}}}")
        assert "not a verb I recognise" not in observation
        done = terminated or truncated
    assert info["success"] is True
    assert "RESTART" not in observation and "UNDO" not in observation  # offers it would refuse
    assert "The End" in observation


def test_clean_feedback_drops_the_interpreters_closing_offer():
    raw = "You win.\n\nWould you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"
    assert clean_feedback(raw) == "You win."


CHEATERS = {
    "compass cycle": cycle("go north", "go east", "go south", "go west"),
    "back and forth": cycle("go north", "go south"),
    "always look": repeat("look"),
    "grab and walk": cycle("take coin", "go east", "take coin", "go north", "open door"),
    "every command at once": repeat("go north, go east, go south, go west, take coin, open door"),
    "invalid text": INVALID,
}


def test_degenerate_strategies_do_not_beat_random_play():
    check_degenerate("textworld:Quest-Easy-v0", CHEATERS, seeds=range(12), games=2)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_degenerate_strategies_lose_on_every_id(env_id):
    check_degenerate(env_id, CHEATERS, seeds=range(40), games=8)
