"""Envs in worker processes: a worker that dies costs the episodes it held, and is replaced."""

from __future__ import annotations

import os

import pytest

import palaestra
from palaestra.agents.simple import PolicyAgent
from palaestra.core import deregister
from palaestra.runner import Runner, Task, make_tasks
from palaestra.runner.process import ProcessEnvPool, WorkerDied
from tests.server.served_envs import Mortal


@pytest.fixture
def mortal_env():
    palaestra.register("test:RunnerMortal-v0", Mortal, override=True)
    yield "test:RunnerMortal-v0"
    deregister("test:RunnerMortal-v0")


def test_a_dead_worker_process_costs_only_its_episodes_and_is_replaced(mortal_env):
    agent = PolicyAgent(lambda obs: "die" if obs == "echo env, seed 7" else "x")
    runner = Runner(agent, max_turns=3, concurrency=4, process_workers=2)
    episodes = runner.run(make_tasks([mortal_env], range(60)))
    errored = [e for e in episodes if e.error is not None]
    assert 1 <= len(errored) <= 4  # at most the episodes in flight
    assert all("WorkerDied" in e.error for e in errored)
    assert all(e.num_turns == 3 for e in episodes if e.error is None)


async def test_the_pool_replaces_a_dead_worker_and_fails_only_the_envs_it_held(mortal_env):
    task = Task(mortal_env)
    async with ProcessEnvPool(2) as pool:
        doomed, other = pool.acquire(task), pool.acquire(task)
        await doomed.areset(seed=0)
        await other.areset(seed=1)
        dead_pid = (await doomed.astep("x"))[4]["pid"]
        with pytest.raises(WorkerDied, match="died"):
            await doomed.astep("die")
        with pytest.raises(WorkerDied, match="died earlier"):
            await doomed.astep("x")
        assert (await other.astep("y"))[0] == "echo: y"  # the other worker's env lives on
        doomed.release(reuse=False)  # never raises
        fresh = pool.acquire(task)  # the replacement is the least loaded
        await fresh.areset(seed=2)
        fresh_pid = (await fresh.astep("z"))[4]["pid"]
        assert pool.replaced == 1 and fresh_pid not in (dead_pid, os.getpid())


def test_a_worker_keeps_a_bounded_number_of_released_envs_and_closes_the_rest(monkeypatch):
    from palaestra.runner import process

    closed = []
    monkeypatch.setattr(process, "_worker_free", {})
    monkeypatch.setattr(process, "MAX_IDLE_ENVS", 2)
    spec = palaestra.spec("game:GuessTheNumber-v0")
    for handle in range(5):
        process.reset_in_worker(handle, spec, {}, handle, None)
        monkeypatch.setattr(
            process._worker_envs[handle], "close", lambda h=handle: closed.append(h)
        )
    for handle in range(4):
        process.release_in_worker(handle, reuse=True)
    process.release_in_worker(4, reuse=False)  # after a crash: never reused
    assert [len(free) for free in process._worker_free.values()] == [2]
    assert closed == [2, 3, 4]
