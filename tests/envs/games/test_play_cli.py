"""`palaestra play` drives every game through its stdin: the oracle's moves, replayed."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import palaestra
from palaestra.cli import app

GAME_IDS = palaestra.list_envs("game:*")


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_play_replays_the_oracles_moves(env_id):
    env = palaestra.make(env_id)
    observation, _ = env.reset(seed=3)
    oracle, moves, success = env.oracle(), [], None
    for _ in range(env.max_turns or 200):
        moves.append(oracle(observation).replace("\n", " "))
        observation, _, terminated, truncated, info = env.step(moves[-1])
        if terminated or truncated:
            success = info.get("success")
            break
    result = CliRunner().invoke(app, ["play", env_id, "--seed", "3"], input="\n".join(moves) + "\n")
    assert result.exit_code == 0, result.output
    assert ("success: return" in result.output) == bool(success), result.output[-500:]
