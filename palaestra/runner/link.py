"""One WebSocket connection of an env server client, driven by the event loop's callbacks.

The connection is an asyncio protocol around websockets' sans-I/O state machine: requests
queued within one turn of the event loop go out as one frame, written in a callback of that
turn; answers are matched to their requests as their frame arrives, in the transport's
``data_received``. No task wakes per request or per answer. Deadlines are kept by one timer
of the loop, so they hold whatever the connection does (a server that never answers, never
reads, or a socket that hangs), and a ping finds a peer gone silent while nothing is asked.
HTTP proxies are not supported: an env server is reached directly.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from palaestra.runner.network import (
    ACTION_LIMIT_HEADER,
    FRAME_BYTES,
    LOST,
    REFUSED,
    EnvServerError,
    encode_frame,
    ignore_failure,
)

PING_INTERVAL_S = 20.0
"""A connection that has received nothing for this long sends a ping."""


async def open_link(
    url: str, token: str | None, timeout_s: float, connect_timeout_s: float
) -> Link:
    """Connect to the env server's sessions endpoint ``url`` (``ws://`` or ``wss://``)."""
    uri = parse_uri(url)
    protocol = ClientProtocol(uri, max_size=None)
    request = protocol.connect()
    if token:
        request.headers["Authorization"] = f"Bearer {token}"
    protocol.send_request(request)
    link = Link(protocol, timeout_s)
    context = ssl.create_default_context() if uri.secure else None
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(connect_timeout_s):
            await loop.create_connection(lambda: link, uri.host, uri.port, ssl=context)
            await link.opened
    except (OSError, TimeoutError) as exc:
        link.abort()
        raise EnvServerError(f"cannot reach the env server at {url}: {exc!r}") from exc
    except EnvServerError as exc:
        message = f"env server at {url} refused the connection: {exc}"
        raise EnvServerError(message, exc.code) from exc
    return link


def _frames(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``messages`` cut into frames of about :data:`FRAME_BYTES` at most (a big action alone)."""
    frames: list[list[dict[str, Any]]] = [[]]
    size = 0
    for message in messages:
        grows = len(message.get("action") or "") + 64
        if frames[-1] and size + grows > FRAME_BYTES:
            frames.append([])
            size = 0
        frames[-1].append(message)
        size += grows
    return frames


class Link(asyncio.Protocol):
    """One WebSocket connection of one event loop: sends queued requests as frames, matches
    answers by id, and fails each request still unanswered at its deadline.

    Every request of a link has the same timeout, so deadlines come in id order and one
    timer, set for the oldest pending request, serves them all.
    """

    def __init__(self, protocol: ClientProtocol, timeout_s: float):
        self.loop = asyncio.get_running_loop()
        self.protocol = protocol
        self.timeout_s = timeout_s
        self.max_action_bytes: int | None = None
        """The server's limit on one action (UTF-8 bytes), if it announced one."""
        self.late_answers = 0
        self.sessions = itertools.count()
        self.opened: asyncio.Future[None] = self.loop.create_future()
        """Done when the handshake is: with an EnvServerError if the server refused it."""
        self._open = False
        self._closed = False
        self._transport: asyncio.Transport | None = None
        self._ids = itertools.count()
        self._pending: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._outbox: list[dict[str, Any]] = []
        self._fragments: list[bytes] = []
        self._write_paused_at: float | None = None
        self._last_received = self.loop.time()
        self._pinged_at: float | None = None
        self._keepalive = self.loop.call_later(PING_INTERVAL_S, self._ping)
        self._failure = "connection closed"
        # asyncio.run cancels the tasks left when it ends: this one then drops the socket, so
        # the server closes this connection's sessions instead of waiting for their idle time.
        self._watch = self.loop.create_task(self._watch_loop())

    @property
    def alive(self) -> bool:
        """Whether requests can go out: the connection is open and its event loop runs now."""
        if not self._open:
            return False
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def request(self, op: str, session: int, **fields: Any) -> asyncio.Future[Any]:
        """Queue one request; the future gets its answer's payload or an EnvServerError, at
        the latest when the request's deadline passes."""
        if not self.alive:
            future = asyncio.get_running_loop().create_future()
            reason = "connection belongs to an earlier event loop" if self._open else self._failure
            future.set_exception(EnvServerError(f"env server {reason}", LOST))
            return future
        loop = self.loop
        future = loop.create_future()
        request_id = next(self._ids)
        deadline = loop.time() + self.timeout_s
        self._pending[request_id] = (future, deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        if not self._outbox:
            loop.call_soon(self._send_requests)
        self._outbox.append({"id": request_id, "op": op, "session": session, **fields})
        return future

    def notify(self, op: str, session: int, **fields: Any) -> None:
        """Queue a request whose answer nobody waits for (closing a session)."""
        if self.alive:
            self.request(op, session, **fields).add_done_callback(ignore_failure)

    def abort(self) -> None:
        """Drop the socket at once (the server then closes this connection's sessions)."""
        self._fail("connection closed by the client")

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._flush()

    def data_received(self, data: bytes) -> None:
        self._last_received = self.loop.time()
        protocol = self.protocol
        protocol.receive_data(data)
        try:
            for event in protocol.events_received():
                if isinstance(event, Frame):
                    self._frame_received(event)
                else:
                    self._handshake_done(event)
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # not answers
            self._fail(f"sent a malformed frame: {exc!r}")
            return
        self._flush()  # pongs, and the reply to a closing handshake
        if protocol.state is State.CLOSED or protocol.close_expected():
            self._fail_closed()

    def eof_received(self) -> None:
        self.protocol.receive_eof()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection lost: {exc!r}" if exc else "closed the connection")

    def pause_writing(self) -> None:
        self._write_paused_at = self.loop.time()

    def resume_writing(self) -> None:
        self._write_paused_at = None

    # internals

    def _handshake_done(self, response: Response) -> None:
        error = self.protocol.handshake_exc
        if error is not None:
            status = response.status_code
            self._fail(str(error), REFUSED if status in (401, 403) else None)
            return
        limit = response.headers.get(ACTION_LIMIT_HEADER)
        self.max_action_bytes = int(limit) if limit and limit.isdigit() else None
        self._open = True
        self.opened.set_result(None)

    def _frame_received(self, frame: Frame) -> None:
        if frame.opcode is Opcode.TEXT or frame.opcode is Opcode.CONT:
            if not frame.fin:
                self._fragments.append(frame.data)
                return
            data = frame.data
            if self._fragments:
                data = b"".join([*self._fragments, data])
                self._fragments.clear()
            for answer in json.loads(data):
                self._settle(answer)

    def _settle(self, answer: dict[str, Any]) -> None:
        entry = self._pending.pop(answer.get("id"), None)  # type: ignore[arg-type]
        if entry is None or entry[0].done():
            self.late_answers += 1
            return
        future = entry[0]
        if "error" in answer:
            future.set_exception(EnvServerError(answer["error"], answer.get("code")))
        else:
            future.set_result(answer["ok"])

    def _send_requests(self) -> None:
        queued, self._outbox = self._outbox, []
        if not self._open:
            return
        if self.protocol.state is not State.OPEN:  # its end is read, not yet handled
            self._fail_closed()
            return
        for frame in _frames(queued):
            self.protocol.send_text(encode_frame(frame).encode())
        self._flush()

    def _flush(self) -> None:
        """Write what the protocol has queued (the transport buffers what the socket cannot
        take yet)."""
        data = self.protocol.data_to_send()
        transport = self._transport
        if data and transport is not None and not transport.is_closing():
            transport.write(b"".join(data))

    def _expire(self) -> None:
        """Fail the requests past their deadline; set the timer for the next one."""
        self._timer = None
        now = self.loop.time()
        pending = self._pending
        while pending:
            request_id = next(iter(pending))
            future, deadline = pending[request_id]
            if deadline > now:
                self._timer = self.loop.call_at(deadline, self._expire)
                break
            del pending[request_id]
            if not future.done():
                future.set_exception(
                    EnvServerError(f"env server gave no answer within {self.timeout_s:g} s")
                )
        paused_at = self._write_paused_at
        if paused_at is not None and now - paused_at >= self.timeout_s:
            self._fail(f"took no data for {self.timeout_s:g} s")

    def _ping(self) -> None:
        """Ping a peer that has sent nothing for a while; fail the link when it sent
        nothing since the last ping, for as long as a request may wait."""
        now = self.loop.time()
        pinged_at = self._pinged_at
        if pinged_at is not None and self._last_received < pinged_at:
            if now - pinged_at >= max(PING_INTERVAL_S, self.timeout_s):
                silent = now - self._last_received
                self._fail(f"sent nothing for {silent:.0f} s, not even a pong")
                return
        elif self._open and now - self._last_received >= PING_INTERVAL_S:
            self.protocol.send_ping(b"")
            self._flush()
            self._pinged_at = now
        self._keepalive = self.loop.call_later(PING_INTERVAL_S, self._ping)

    async def _watch_loop(self) -> None:
        try:
            await self.loop.create_future()  # never done: only cancelled
        except asyncio.CancelledError:
            self._fail("connection closed with its event loop")
            raise

    def _fail_closed(self) -> None:
        """Fail the link the server closed, with the reason it gave."""
        received = self.protocol.close_rcvd  # its close frame, before the socket closes too
        reason = received.reason if received is not None else None
        self._fail(f"closed the connection ({reason})" if reason else "closed the connection")

    def _fail(self, reason: str, code: str | None = None) -> None:
        """Fail every pending request and drop the socket (the server then closes this
        connection's sessions at once); ``code`` goes with a refused handshake's error."""
        if self._closed:
            return
        self._closed, self._open, self._failure = True, False, reason
        if self._transport is not None:
            self._transport.abort()
        for timer in (self._timer, self._keepalive):
            if timer is not None:
                timer.cancel()
        if not self.opened.done():
            self.opened.set_exception(EnvServerError(reason, code))
            ignore_failure(self.opened)  # open_link may have stopped waiting (its timeout)
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(EnvServerError(f"env server {reason}", LOST))
        self._pending.clear()
        if self._watch is not asyncio.current_task():
            self._watch.cancel()
