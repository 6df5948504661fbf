import pytest
from rich.console import Console
from typer.testing import CliRunner

import palaestra
from palaestra import cli
from palaestra.cli import app

runner = CliRunner()


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200-column console whatever ``COLUMNS`` said when ``palaestra.cli`` was imported."""
    monkeypatch.setattr(cli, "console", Console(width=200))


def test_list_shows_ids_with_family_turns_and_tools(wide_console):
    result = runner.invoke(app, ["list", "game:*"])
    assert result.exit_code == 0
    assert "game:Wordle-Hard-v0" in result.output and "difficulty=hard" in result.output
    assert f"{len(palaestra.list_envs('game:*'))} environments" in result.output


def test_list_with_no_match_fails():
    result = runner.invoke(app, ["list", "nothing:*"])
    assert result.exit_code == 1 and "no environment matches" in result.output


def test_show_describes_reward_and_runs_an_example(wide_console):
    result = runner.invoke(app, ["show", "game:GuessTheNumber-v0"])
    assert result.exit_code == 0
    assert "reward per step [0, 1]" in result.output
    assert "oracle, turn 1" in result.output and "\\boxed{25}" in result.output


def test_show_unknown_id_suggests():
    result = runner.invoke(app, ["show", "game:Wordl-v0"])
    assert result.exit_code == 2 and "did you mean 'game:Wordle-v0'" in result.output


def test_play_reads_moves_until_the_game_ends():
    # Binary search on 1..20 finds any number within 5 guesses; replaying the same seed's
    # oracle moves through the CLI must end in success.
    env = palaestra.make("game:GuessTheNumber-Easy-v0")
    observation, _ = env.reset(seed=4)
    oracle, moves = env.oracle(), []
    while True:
        moves.append(oracle(observation))
        observation, _, terminated, _, _ = env.step(moves[-1])
        if terminated:
            break
    result = runner.invoke(
        app, ["play", "game:GuessTheNumber-Easy-v0", "--seed", "4"], input="\n".join(moves) + "\n"
    )
    assert result.exit_code == 0
    assert "success: return 1" in result.output


def test_play_quits_on_eof_and_command():
    assert runner.invoke(app, ["play", "game:Wordle-v0", "--seed", "0"], input="").exit_code == 0
    result = runner.invoke(app, ["play", "game:Wordle-v0", "--seed", "0"], input=":q\n")
    assert result.exit_code == 0 and "turn 1" not in result.output
