"""Slow envs do not block others: each session whose env does not step inline has a thread
of its own (or a worker process), so one client's slow step never holds another's."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from palaestra.agents.simple import OracleAgent, PolicyAgent
from palaestra.runner import Runner, Task, make_tasks
from palaestra.runner.network import EnvServerClient
from palaestra.server import ServerLimits, Stepping
from tests.server import served_envs
from tests.server.conftest import metric, running_server, wait_for


async def test_slow_steps_of_one_client_never_hold_another_clients_steps():
    """Ten steps blocked at once (more threads than a shared default pool has) while
    another client steps a thread-stepped env: its steps all answer first."""
    served_envs.GATE.clear()
    with running_server() as url:
        slow_client, quick_client = EnvServerClient(url), EnvServerClient(url, timeout_s=20)
        slow = [slow_client.acquire(Task("test:Gated-v0")) for _ in range(10)]
        for handle in slow:
            await handle.areset(seed=0)
        blocked = [asyncio.ensure_future(handle.astep("slow")) for handle in slow]
        try:
            await asyncio.sleep(0.2)  # the ten steps now wait on their threads
            quick = quick_client.acquire(Task("test:ThreadedEcho-v0"))
            await quick.areset(seed=0)
            for i in range(20):
                assert (await quick.astep(f"q{i}"))[0] == f"echo: q{i}"
            assert not any(step.done() for step in blocked)
        finally:
            served_envs.GATE.set()
        assert [(await step)[0] for step in blocked] == ["echo: slow"] * 10
        await slow_client.aclose()
        await quick_client.aclose()


def test_each_session_steps_on_its_own_thread(env_server):
    def threads(env_id: str) -> set[str]:
        runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=3, host=EnvServerClient(env_server))
        episodes = runner.run(make_tasks([env_id], range(4)))
        return {turn.info["thread"] for episode in episodes for turn in episode.turns}

    for env_id in ("test:ThreadedEcho-v0", "test:NativeAsync-v0"):
        names = threads(env_id)  # four episodes at once: four sessions, four threads
        assert len(names) == 4 and all(name.startswith("palaestra-session-") for name in names)


def test_envs_step_in_worker_processes():
    with running_server(stepping=Stepping("processes", 2)) as url:
        tasks = make_tasks(["test:ThreadedEcho-v0"], range(4))
        runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=3, host=EnvServerClient(url))
        episodes = runner.run(tasks)
        pids = {turn.info["pid"] for episode in episodes for turn in episode.turns}
        assert len(pids) == 2 and os.getpid() not in pids
        games = make_tasks(["game:GuessTheNumber-v0"], range(3))  # inline envs stay inline
        assert all(e.success for e in Runner(OracleAgent(), host=EnvServerClient(url)).run(games))
        remote = Runner(PolicyAgent(lambda obs: r"\boxed{25}"), host=EnvServerClient(url))
        local = Runner(PolicyAgent(lambda obs: r"\boxed{25}"))
        assert [e.total_reward for e in remote.run(games)] == [
            e.total_reward for e in local.run(games)
        ]
        assert metric(url, "palaestra_sessions_opened_total") >= 5


def test_stepping_settings_are_checked():
    with pytest.raises(ValueError, match="threads"):
        Stepping("fibers")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        Stepping("processes", 0)


def _kill_one_worker(obs: str) -> str:
    """Seed 3's first step kills the worker process holding its env."""
    return "die" if obs == "echo env, seed 3" else "x"


def test_a_dead_step_process_costs_only_its_sessions_and_is_replaced():
    with running_server(stepping=Stepping("processes", 2)) as url:
        host = EnvServerClient(url)
        runner = Runner(PolicyAgent(_kill_one_worker), max_turns=3, concurrency=4, host=host)
        episodes = runner.run(make_tasks(["test:Mortal-v0"], range(40)))
        errored = [e for e in episodes if e.error is not None]
        assert 1 <= len(errored) <= 4 and "died" in errored[0].error  # at most those in flight
        later = runner.run(make_tasks(["test:Mortal-v0"], range(10, 50)))
        assert [e.error for e in later] == [None] * 40
        runner.run([])  # the client's pooled sessions close with its connection:
        host.close()
        wait_for(lambda: metric(url, "palaestra_sessions_open") == 0)
    # the server stopped: every worker process with it (else the server's thread would hang)


@pytest.mark.parametrize("closed_by", ["idle", "disconnect"])
async def test_sessions_of_a_dead_step_process_are_still_closed(closed_by: str):
    """Closing sessions whose process died never stops the reaper or a disconnect's clean-up."""
    idle_timeout_s = 1.0 if closed_by == "idle" else 300.0
    limits = ServerLimits(idle_timeout_s=idle_timeout_s)
    with running_server(stepping=Stepping("processes", 2), limits=limits) as url:
        host = EnvServerClient(url)
        handles = [host.acquire(Task("test:Mortal-v0")) for _ in range(6)]
        pids = set()
        for handle in handles:
            await handle.areset(seed=0)
            pids.add((await handle.astep("x"))[4]["pid"])
        os.kill(min(pids), signal.SIGKILL)  # three sessions lose their process
        if closed_by == "disconnect":
            await host.aclose()
        await asyncio.to_thread(wait_for, lambda: metric(url, "palaestra_sessions_open") == 0)
        closed = metric(url, f'palaestra_sessions_closed_total{{reason="{closed_by}"}}')
        assert len(pids) == 2 and closed == 6
        await host.aclose()
