"""A server that restarts costs a run the episodes in flight only: episodes that start while
it is away wait for it (connecting again with backoff until their deadline)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from palaestra.agents.simple import OracleAgent, PolicyAgent
from palaestra.runner import Runner, Task, make_tasks
from palaestra.runner.network import EnvServerClient
from tests.server.conftest import (
    free_port,
    kill,
    metric,
    running_server,
    start_server_process,
    wait_for,
)


async def test_episodes_started_while_the_server_is_down_wait_for_it():
    port = free_port()
    host = EnvServerClient(f"http://127.0.0.1:{port}", timeout_s=30, connect_timeout_s=1)
    runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=2, host=host)
    run = asyncio.ensure_future(runner.collect(make_tasks(["test:Echo-v0"], range(6))))
    await asyncio.sleep(0.5)  # every episode is waiting for a server that is not there yet
    assert not run.done()
    with running_server(port=port) as url:
        episodes = await run
        assert [e.error for e in episodes] == [None] * 6
        assert metric(url, 'palaestra_requests_total{op="reset"}') == 6
        await host.aclose()


def _restart_when(url: str, resets: int, server, restarted: list) -> threading.Thread:
    """A thread that SIGKILLs ``server`` once it has served ``resets`` resets and starts
    another on its port 2 s later (appended to ``restarted``)."""
    port = int(url.rsplit(":", 1)[1])

    def kill_and_restart() -> None:
        wait_for(lambda: metric(url, 'palaestra_requests_total{op="reset"}') >= resets, 120)
        kill(server)
        time.sleep(2.0)
        restarted.append(start_server_process(port))

    thread = threading.Thread(target=kill_and_restart, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_killed_server_costs_a_runner_only_its_episodes_in_flight():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    servers = [start_server_process(port)]
    try:
        killer = _restart_when(url, 100, servers[0], servers)
        runner = Runner(OracleAgent(), concurrency=32, host=EnvServerClient(url, timeout_s=60))
        episodes = runner.run(make_tasks(["game:GuessTheNumber-v0"], range(400)))
        killer.join()
        errored = [e for e in episodes if e.error is not None]
        assert len(servers) == 2 and len(errored) <= 32  # at most the episodes in flight
        assert all(e.success for e in episodes if e.error is None)
        assert metric(url, 'palaestra_requests_total{op="reset"}') > 0  # the second server's
    finally:
        for server in servers:
            kill(server)


@pytest.mark.slow
def test_a_trainer_step_survives_a_server_restart(tmp_path: Path):
    pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="the tiny model needs transformers")
    from palaestra.trainers import tiny
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.trainer import Trainer
    from tests.trainers.letter_env import ENV_ID, register_once

    register_once()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    servers = [start_server_process(port)]
    rollout = {"env_id": ENV_ID, "group_size": 4, "groups_per_step": 2, "max_new_tokens": 3}
    config = TrainerConfig.model_validate(
        {
            "steps": 3,
            "output_dir": str(tmp_path),
            "rollout": {**rollout, "env_server": url},
            "log": {"console": False},
        }
    )
    tokenizer = tiny.train_tokenizer(["Write a few lowercase letters."], vocab_size=280)
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    collect, steps = trainer.runner.collect, []

    async def collect_while_the_server_restarts(tasks: list[Task]):
        steps.append(len(tasks))
        if len(steps) == 2:  # the server dies between steps and is back 2 s later
            kill(servers[0])
            threading.Timer(2.0, lambda: servers.append(start_server_process(port))).start()
        return await collect(tasks)

    trainer.runner.collect = collect_while_the_server_restarts
    try:
        metrics = trainer.train()
        assert len(metrics) == 3 and len(servers) == 2
        assert [m["errors"] for m in metrics] == [0.0, 0.0, 0.0]
    finally:
        for server in servers:
            kill(server)
