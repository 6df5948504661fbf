import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

import palaestra
from palaestra import cli
from palaestra.cli import app
from palaestra.core.env import Env

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


class Bracketed(Env):
    """Text with square brackets everywhere rich could read markup."""

    system_prompt = "Moves look like [row col]; install palaestra[extra] for more."
    max_turns = 3

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turns = 0
        return "Type [row col] to press a light.", {}

    def step(self, action):
        self.turns += 1
        done = action.strip() == "[1 1]"
        return f"You pressed {action.strip()} [bold]x[/bold]", float(done), done, False, {}

    def oracle(self):
        return lambda observation: "[1 1]"


@pytest.fixture
def bracketed_env():
    palaestra.register("test:Bracketed-v0", Bracketed, description="Press [row col].")
    yield "test:Bracketed-v0"
    palaestra.core.deregister("test:Bracketed-v0")


def test_show_and_list_print_env_text_literally(bracketed_env):
    shown = runner.invoke(app, ["show", bracketed_env], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    for text in ("Type [row col] to press", "palaestra[extra]", "You pressed [1 1] [bold]x[/bold]"):
        assert text in shown.output
    listed = runner.invoke(app, ["list", "test:Bracket*"], env={"COLUMNS": "200"})
    assert "Press [row col]." in listed.output


def test_play_ignores_empty_lines_and_answers_commands(bracketed_env):
    result = runner.invoke(
        app, ["play", bracketed_env], input="\n   \n:help\n:nope\n[1 1]\n", env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "turn 1, reward 1" in result.output  # blank lines and commands took no turn
    assert "an empty line is not a move" in result.output
    assert result.output.count("Type [row col] to press a light.") == 2  # :help shows the task
    assert "unknown command ':nope'" in result.output


def test_show_names_a_missing_extra_in_one_line():
    class NeedsExtra(Bracketed):
        def __init__(self):
            raise ImportError("needs foo: pip install 'palaestra[foo]'")

    palaestra.register("test:NeedsExtra-v0", NeedsExtra)
    try:
        result = runner.invoke(app, ["show", "test:NeedsExtra-v0"])
    finally:
        palaestra.core.deregister("test:NeedsExtra-v0")
    assert result.exit_code == 2
    assert result.output.strip() == "error: needs foo: pip install 'palaestra[foo]'"


@pytest.mark.parametrize(
    ("command", "module", "extra"),
    [
        (["serve", "game:Wordle-v0"], "uvicorn", "serve"),
        (["serve", "sql:*"], "sqlglot", "sql"),
        (["eval", "game:Wordle-v0", "--env-server", "ws://127.0.0.1:9"], "websockets", "serve"),
        (["eval", "math:Arithmetic-v0", "--agent", "hf:Qwen/Qwen3-0.6B"], "transformers", "hf"),
        (["train", "{config}"], "sqlglot", "sql"),
    ],
)
def test_every_command_names_a_missing_extra_before_it_starts(
    command, module, extra, tmp_path, monkeypatch
):
    config = tmp_path / "run.yaml"
    config.write_text("rollout: {env_id: 'sql:Mixed-v0'}\n")
    monkeypatch.setitem(sys.modules, module, None)  # as if the package were not installed
    result = runner.invoke(app, [part.format(config=config) for part in command])
    assert result.exit_code == 2, result.output
    assert f"({module} not installed): pip install 'palaestra[{extra}]'" in result.output
    assert len(result.output.strip().splitlines()) == 1
