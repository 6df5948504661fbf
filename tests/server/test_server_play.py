"""Agents without a model over the wire: the server plays the oracle and random agents from
the env's own state, and the episodes equal local ones but for the mark on each turn."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import palaestra
from palaestra.agents.simple import OracleAgent, RandomAgent
from palaestra.cli import app
from palaestra.evaluation.report import read_jsonl
from palaestra.runner import Runner, make_tasks
from palaestra.runner.network import PLAYED_BY, EnvServerClient
from palaestra.server import Stepping
from tests.server.conftest import metric, running_server

ENV_IDS = [
    "game:GuessTheNumber-v0",  # steps inline on the server's loop
    "game:Wordle-v0",
    "math:Arithmetic-v0",  # steps on its session's thread
    "math:Arithmetic-Python-v0",  # async twins of its own (a tool env)
    "rg:basic_arithmetic-v0",
]


def _unmarked(episode, policy: str) -> dict:
    """The episode as a local run records it: each turn's mark checked, then removed."""
    record = {**episode.to_dict(), "duration_s": 0.0}
    for turn in record["turns"]:
        assert turn["info"].pop(PLAYED_BY) == policy
    return record


@pytest.mark.parametrize("agent", [OracleAgent(), RandomAgent()], ids=["oracle", "random"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_served_oracle_and_random_episodes_equal_local_ones(env_server, env_id, agent):
    if env_id not in palaestra.list_envs():
        pytest.skip(f"{env_id} is not registered (its extra is missing)")
    tasks = make_tasks([env_id], range(3), group_size=2)
    local = Runner(agent).run(tasks)
    remote = Runner(agent, host=EnvServerClient(env_server)).run(tasks)
    assert [e.error for e in remote] == [None] * len(tasks)
    local_records = [{**e.to_dict(), "duration_s": 0.0} for e in local]
    assert [_unmarked(e, agent.env_policy) for e in remote] == local_records
    if agent.env_policy == "oracle":
        assert all(e.success for e in remote)


def test_cli_eval_with_the_oracle_on_an_env_server(env_server, tmp_path):
    args = ["eval", "game:GuessTheNumber-v0", "math:Arithmetic-v0", "--agent", "oracle"]
    args += ["-n", "3", "--env-server", env_server, "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    episodes = read_jsonl(tmp_path / "trajectories.jsonl")
    assert len(episodes) == 6 and all(e.success for e in episodes)
    assert all(turn.info[PLAYED_BY] == "oracle" for e in episodes for turn in e.turns)
    assert metric(env_server, 'palaestra_requests_total{op="step"}') == sum(
        e.num_turns for e in episodes
    )


def test_envs_in_worker_processes_refuse_to_play_with_a_clear_error():
    with running_server(stepping=Stepping("processes", 1)) as url:
        runner = Runner(OracleAgent(), host=EnvServerClient(url))
        (episode,) = runner.run(make_tasks(["test:ThreadedEcho-v0"], [0]))
        assert "--step-executor threads" in episode.error


def test_an_env_without_an_oracle_fails_its_episode_only(env_server):
    runner = Runner(OracleAgent(), host=EnvServerClient(env_server))
    crashed, fine = runner.run(make_tasks(["test:Echo-v0", "game:GuessTheNumber-v0"], [0]))
    assert "NotImplementedError: EchoEnv has no oracle" in crashed.error
    assert fine.error is None and fine.success
