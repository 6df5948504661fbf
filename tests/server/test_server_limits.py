"""Bounded resources: malformed requests, repeated ids, queues, unread answers, connections,
idle connections and bursts of creates, each spoken over the wire by hand."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from palaestra.agents.simple import PolicyAgent
from palaestra.runner import Runner, Task
from palaestra.runner.network import EnvServerClient, EnvServerError
from palaestra.server import ServerLimits
from tests.server import served_envs
from tests.server.conftest import metric, raw_socket, read_answers, running_server, wait_for


async def _open(ws, session: int, env: str, first_id: int) -> None:
    await ws.send(
        json.dumps(
            [
                {"id": first_id, "op": "create", "session": session, "env": env},
                {"id": first_id + 1, "op": "reset", "session": session, "seed": 0},
            ]
        )
    )
    created, reset = await read_answers(ws, 2)
    assert created == {"id": first_id, "ok": None}
    assert reset["ok"][0] == "echo env, seed 0"


async def _step(ws, request_id: int, session: int, action: str) -> dict:
    await ws.send(
        json.dumps([{"id": request_id, "op": "step", "session": session, "action": action}])
    )
    (answer,) = await read_answers(ws, 1)
    assert answer["id"] == request_id
    return answer


GARBAGE = [
    b"\x00\x01binary",
    "not json",
    '{"not": "a list"}',
    "[3]",
    '[{"op": "step", "session": 0, "action": "x"}]',
    '[{"id": "seven", "op": "step", "session": 0, "action": "x"}]',
    '[{"id": 10, "op": "dance", "session": 0}]',
    '[{"id": 11, "op": "step", "session": [0], "action": "x"}]',
    '[{"id": 12, "op": "step", "session": 0, "action": 42}]',
    '[{"id": 13, "op": "reset", "session": 0, "seed": "zero"}]',
    '[{"id": 14, "op": "create", "session": 5, "env": ["test:Echo-v0"]}]',
    '[{"id": 15, "op": "create", "session": 6, "env": "test:Echo-v0", "kwargs": [1]}]',
    '[{"id": 16, "op": "step", "session": 0, "play": "cheat"}]',
    '[{"id": 17, "op": "step", "session": 0, "play": "random", "rng_seed": -1}]',
    '[{"id": 18, "op": "step", "session": true, "action": "x"}]',
    "[" * 100_000,  # nesting past the JSON parser's depth
]


async def test_malformed_requests_get_an_error_answer_and_cost_no_other_session():
    limits = ServerLimits(max_action_bytes=1000)
    with running_server(limits=limits) as url:
        async with raw_socket(url) as ws:
            await _open(ws, 0, "test:Echo-v0", 0)
            await _open(ws, 1, "test:ThreadedEcho-v0", 2)
            errors = []
            for frame in GARBAGE:
                await ws.send(frame)
                (answer,) = await read_answers(ws, 1)
                assert "ok" not in answer
                errors.append(answer["error"])
            assert "not binary" in errors[0]
            assert errors[1] == errors[2] == "a frame is a JSON list of requests"
            assert errors[3] == "a request is a JSON object"
            assert all("integer >= 0" in error for error in errors[4:6] + errors[7:8])
            assert "unknown op 'dance'" in errors[6]
            assert "action must be a string" in errors[8]
            assert "a seed is null or an integer" in errors[9]
            assert "env must be a string" in errors[10]
            assert "kwargs must be a JSON object" in errors[11]
            assert "not str 'cheat'" in errors[12]
            assert "rng_seed" in errors[13]
            assert "session is an integer" in errors[14]
            assert errors[15] == "a frame is a JSON list of requests"
            big = await _step(ws, 19, 0, "x" * 1001)  # over the limit: refused, nothing else
            assert big["code"] == "too_large" and "1001 bytes exceeds" in big["error"]
            # Both sessions still step, on the same connection.
            assert (await _step(ws, 20, 0, "a"))["ok"][0] == "echo: a"
            assert (await _step(ws, 21, 1, "b"))["ok"][0] == "echo: b"
        assert metric(url, 'palaestra_sessions_closed_total{reason="disconnect"}') == 2


async def test_an_answer_that_is_not_json_becomes_an_error_and_costs_no_other_answer(env_server):
    async with raw_socket(env_server) as ws:
        await _open(ws, 0, "test:NotJSON-v0", 0)
        await _open(ws, 1, "test:ThreadedNotJSON-v0", 2)
        await _open(ws, 2, "test:Echo-v0", 4)
        steps = [(0, "loop"), (2, "a"), (1, "loop"), (0, "b"), (2, "c")]
        frame = [
            {"id": 10 + n, "op": "step", "session": session, "action": action}
            for n, (session, action) in enumerate(steps)
        ]
        await ws.send(json.dumps(frame))  # answered inline, in one batch, and from a thread
        received = await asyncio.wait_for(read_answers(ws, len(frame)), 30)
        answers = {answer["id"]: answer for answer in received}
        for request_id in (10, 12):
            assert "the env's answer is not JSON" in answers[request_id]["error"]
        assert answers[11]["ok"][0] == "echo: a"
        assert answers[13]["ok"][0] == "echo: b"
        assert answers[14]["ok"][0] == "echo: c"


async def test_a_repeated_request_id_never_runs_a_step_twice(env_server):
    async with raw_socket(env_server) as ws:
        await _open(ws, 0, "test:Echo-v0", 0)
        step = {"id": 5, "op": "step", "session": 0, "action": "once"}
        await ws.send(json.dumps([step, step, {**step, "id": 3}]))
        first, again, lower = await read_answers(ws, 3)
        assert first == {"id": 5, "ok": ["echo: once", 4.0, False, False, {}]}
        assert again["code"] == lower["code"] == "repeated_id"
        assert "never runs" in again["error"]
    assert metric(env_server, 'palaestra_requests_total{op="step"}') == 1


async def test_requests_waiting_behind_their_session_are_bounded():
    with running_server(limits=ServerLimits(max_queued_requests=3)) as url:
        async with raw_socket(url) as ws:
            await _open(ws, 0, "test:Gated-v0", 0)
            served_envs.GATE.clear()
            steps = [{"id": i, "op": "step", "session": 0, "action": f"s{i}"} for i in range(2, 8)]
            await ws.send(json.dumps(steps))  # the first runs, three wait, two are refused
            refused = await read_answers(ws, 2)
            assert [answer["id"] for answer in refused] == [6, 7]
            assert all(answer["code"] == "busy" for answer in refused)
            served_envs.GATE.set()
            done = await read_answers(ws, 4)
            assert [answer["ok"][0] for answer in done] == [f"echo: s{i}" for i in range(2, 6)]


async def test_a_client_that_does_not_read_is_dropped():
    limits = ServerLimits(max_unread_bytes=4 << 20)
    with running_server(limits=limits) as url:
        async with raw_socket(url, max_queue=1, max_size=None) as ws:
            await _open(ws, 0, "test:BigObservation-v0", 0)
            steps = [
                {"id": i, "op": "step", "session": 0, "action": "200000"} for i in range(2, 402)
            ]
            await ws.send(json.dumps(steps))  # 80 MB of answers, never read
            await asyncio.to_thread(
                wait_for,
                lambda: metric(url, 'palaestra_connections_dropped_total{reason="unread"}'),
            )
            await asyncio.to_thread(wait_for, lambda: metric(url, "palaestra_sessions_open") == 0)
            assert metric(url, 'palaestra_sessions_closed_total{reason="disconnect"}') == 1
            assert metric(url, "palaestra_connections_open") == 0
            # Stepping stopped soon after the limit: 4 MiB of answers, plus at most 1 MiB
            # encoded together (FRAME_BYTES), at 200 KB each.
            assert metric(url, 'palaestra_requests_total{op="step"}') <= 21 + 6
            with pytest.raises(ConnectionClosed):  # the socket was dropped
                while True:
                    await ws.recv()


async def test_connections_are_limited_and_idle_ones_closed():
    limits = ServerLimits(max_connections=2, idle_timeout_s=0.3)
    with running_server(limits=limits) as url:
        async with raw_socket(url) as idle:
            busy = EnvServerClient(url)
            handle = busy.acquire(Task("test:Echo-v0"))
            await handle.areset(seed=0)
            with pytest.raises(InvalidStatus, match="503"):
                async with raw_socket(url):
                    pass
            assert metric(url, "palaestra_connections_refused_total") == 1
            with pytest.raises(ConnectionClosed):  # no session: closed once idle
                await idle.recv()
            assert idle.close_code == 1000 and "no session" in idle.close_reason
        # The other client's session idled out too, and then its connection.
        assert metric(url, 'palaestra_connections_dropped_total{reason="idle"}') >= 1
        async with raw_socket(url) as again:  # its place is free again
            await _open(again, 0, "test:Echo-v0", 0)
        await busy.aclose()


async def test_a_connection_whose_sessions_idled_out_is_closed_too():
    with running_server(limits=ServerLimits(idle_timeout_s=0.3)) as url:
        async with raw_socket(url) as ws:
            await _open(ws, 0, "test:Echo-v0", 0)
            with pytest.raises(ConnectionClosed):  # the session idles out, then the connection
                await ws.recv()
        assert metric(url, 'palaestra_sessions_closed_total{reason="idle"}') == 1
        assert metric(url, 'palaestra_connections_dropped_total{reason="idle"}') == 1


async def test_creates_in_flight_count_against_the_session_limit():
    served_envs.SlowBuild.built = 0
    with running_server(limits=ServerLimits(max_sessions=5)) as url:
        async with raw_socket(url) as ws:
            creates = [
                {"id": i, "op": "create", "session": i, "env": "test:SlowBuild-v0"}
                for i in range(60)
            ]
            await ws.send(json.dumps(creates))
            answers = await read_answers(ws, 60)
            assert sum("ok" in answer for answer in answers) == 5
            refused = [answer for answer in answers if "error" in answer]
            assert all("limit of 5 open sessions" in answer["error"] for answer in refused)
        assert served_envs.SlowBuild.built == 5
        assert metric(url, "palaestra_sessions_refused_total") == 55


async def test_the_client_refuses_an_action_past_the_servers_limit_itself():
    limits = ServerLimits(max_action_bytes=1000)
    with running_server(limits=limits) as url:
        host = EnvServerClient(url)
        big, other = (host.acquire(Task("test:Echo-v0")) for _ in range(2))
        await big.areset(seed=0)
        await other.areset(seed=0)
        with pytest.raises(EnvServerError, match="1001 bytes exceeds the server's limit of 1000"):
            await big.astep("é" * 500 + "x")
        assert (await other.astep("fine"))[0] == "echo: fine"
        assert metric(url, 'palaestra_requests_total{op="step"}') == 1  # never sent
        await host.aclose()


class _HeldSocket:
    """A stand-in for the connection's socket: records frames sent and reading paused."""

    def __init__(self) -> None:
        self.on_frame = None
        self.sent: list[str] = []
        self.paused = False

    def attach(self, on_frame) -> None:
        self.on_frame = on_frame

    def send(self, text: str) -> None:
        self.sent.append(text)

    def unsent_bytes(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


async def test_a_huge_frame_is_dispatched_over_several_turns_with_reading_paused():
    from palaestra.server.connection import REQUESTS_PER_TURN, Connection
    from palaestra.server.sessions import SessionTable

    class Silent:
        async def receive(self) -> dict:
            await asyncio.Event().wait()

    socket = _HeldSocket()
    connection = Connection(Silent(), socket, SessionTable())
    serving = asyncio.ensure_future(connection.serve())
    await asyncio.sleep(0)
    count = 3 * REQUESTS_PER_TURN + 5
    socket.on_frame(json.dumps([{"id": i, "op": "dance", "session": 0} for i in range(count)]))
    answered = lambda: sum(len(json.loads(frame)) for frame in socket.sent)  # noqa: E731
    assert socket.paused and answered() == 0  # the first part is answered at the turn's end
    turns = 0
    while socket.paused:
        await asyncio.sleep(0)
        turns += 1
    await asyncio.sleep(0)
    assert turns >= 3 and answered() == count  # other connections' frames ran in between
    serving.cancel()


async def test_answers_unread_by_all_clients_together_are_bounded():
    limits = ServerLimits(max_unread_bytes=64 << 20, max_unread_bytes_total=6 << 20)
    with running_server(limits=limits) as url:
        async with (
            raw_socket(url, max_queue=1, max_size=None) as hoarder,
            raw_socket(url) as reader,
        ):
            await _open(hoarder, 0, "test:BigObservation-v0", 0)
            await _open(reader, 0, "test:Echo-v0", 0)
            steps = [
                {"id": i, "op": "step", "session": 0, "action": "200000"} for i in range(2, 402)
            ]
            await hoarder.send(json.dumps(steps))  # 80 MB of answers, never read
            dropped = 'palaestra_connections_dropped_total{reason="unread"}'
            await asyncio.to_thread(wait_for, lambda: metric(url, dropped) == 1)
            assert (await _step(reader, 2, 0, "a"))["ok"][0] == "echo: a"  # the reader goes on
            # The hoarder was dropped near the server-wide 6 MiB, far below its own 64 MiB.
            assert metric(url, 'palaestra_requests_total{op="step"}') <= 31 + 6 + 1


def test_handshakes_have_a_deadline_and_count_against_the_connection_cap():
    from palaestra.server.run import HTTP_ROOM

    limits = ServerLimits(max_connections=2, handshake_timeout_s=0.5)
    with running_server(limits=limits) as url:
        port = int(url.rsplit(":", 1)[1])
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(2 + HTTP_ROOM + 5)]
        for sock in slow:  # a handshake request that never ends
            sock.settimeout(30)
            with contextlib.suppress(OSError):  # the server may have dropped it already
                sock.sendall(b"GET /sessions HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
        for sock in slow:  # every one is closed: the extra five at once, the rest at the deadline
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1024) == b""
            sock.close()
        assert metric(url, "palaestra_connections_refused_total") == 5
        runner = Runner(PolicyAgent(lambda obs: "x"), max_turns=1, host=EnvServerClient(url))
        assert runner.run([Task("test:Echo-v0", 0)])[0].error is None


async def test_the_memory_of_closed_sessions_goes_back_to_the_system(monkeypatch):
    from palaestra.server import memory

    trims = []
    monkeypatch.setattr(memory, "trim", lambda: trims.append(1) or True)
    with running_server(limits=ServerLimits(idle_timeout_s=2.0)) as url:  # a pass each 0.5 s
        async with raw_socket(url) as ws:
            await _open(ws, 0, "test:Echo-v0", 0)
            await asyncio.sleep(1.2)
            assert trims == []  # nothing closed yet: nothing to hand back
        wait_for(lambda: len(trims) == 2)  # the pass that sees the close, and the next
        await asyncio.sleep(1.2)
        assert len(trims) == 2


def test_a_malloc_arena_max_already_set_rules(monkeypatch):
    from palaestra.server import memory

    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert memory.cap_malloc_arenas(2) is False
    assert memory.trim() in (True, False)
