"""The env server client's WebSocket (palaestra/runner/link.py) against peers that do the
unusual: go silent, fragment their answers, answer with garbage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("websockets", reason="the env server needs the 'serve' extra")

from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

from palaestra.runner import Task, link
from palaestra.runner.network import EnvServerClient, EnvServerError
from tests.server.conftest import running_server

Answer = Callable[[ServerProtocol, list[dict]], None]


@asynccontextmanager
async def peer(answer: Answer | None) -> AsyncIterator[str]:
    """A WebSocket server that accepts the handshake, then calls ``answer`` with each frame
    of requests (None: reads nothing more and sends nothing, pings unanswered)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        protocol = ServerProtocol(max_size=None)
        while not writer.is_closing():
            data = await reader.read(65536)
            if not data:
                break
            protocol.receive_data(data)
            for event in protocol.events_received():
                if not isinstance(event, Frame):
                    protocol.send_response(protocol.accept(event))
                elif answer is not None and event.opcode is Opcode.TEXT:
                    answer(protocol, json.loads(event.data))
            writer.write(b"".join(protocol.data_to_send()))
            if answer is None and protocol.state is State.OPEN:
                while await reader.read(65536):  # silent from now on: pings go unanswered
                    pass
                break

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)


async def test_a_peer_gone_silent_is_found_by_pings(monkeypatch):
    monkeypatch.setattr(link, "PING_INTERVAL_S", 0.1)
    async with peer(None) as url:
        client = EnvServerClient(url, timeout_s=0.3)
        opened = await client.link()
        assert opened.alive
        await until(lambda: not opened.alive)  # no request was pending: only pings tell
        with pytest.raises(EnvServerError, match="sent nothing for"):
            await opened.request("step", 0, action="x")


async def test_an_idle_connection_to_a_live_server_stays_open(monkeypatch):
    monkeypatch.setattr(link, "PING_INTERVAL_S", 0.1)
    with running_server() as url:
        client = EnvServerClient(url, timeout_s=1.0)
        handle = client.acquire(Task("test:Echo-v0"))
        await handle.areset(seed=0)
        await asyncio.sleep(1.5)  # 15 ping intervals: a link whose pings went unanswered fails
        assert (await handle.astep("hi"))[0] == "echo: hi"
        await client.aclose()


async def test_answers_split_into_fragments_are_joined():
    def fragmented(protocol: ServerProtocol, requests: list[dict]) -> None:
        text = json.dumps([{"id": r["id"], "ok": f"answer {r['id']}"} for r in requests])
        middle = len(text) // 2
        protocol.send_text(text[:middle].encode(), fin=False)
        protocol.send_continuation(text[middle:].encode(), fin=True)

    async with peer(fragmented) as url:
        client = EnvServerClient(url, timeout_s=5)
        opened = await client.link()
        answers = [opened.request("step", 0, action=str(i)) for i in range(3)]
        assert await asyncio.gather(*answers) == ["answer 0", "answer 1", "answer 2"]
        await client.aclose()


@pytest.mark.parametrize("answer", [b"not json", b'{"id": 0, "ok": 1}', b"[1, 2]"])
async def test_a_malformed_answer_fails_the_connection_not_the_client(answer: bytes):
    def garbage(protocol: ServerProtocol, requests: list[dict]) -> None:
        protocol.send_text(answer)

    async with peer(garbage) as url:
        client = EnvServerClient(url, timeout_s=5)
        opened = await client.link()
        with pytest.raises(EnvServerError, match="malformed frame"):
            await opened.request("step", 0, action="x")
        assert not opened.alive
