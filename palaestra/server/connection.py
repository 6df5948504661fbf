"""One client's WebSocket on the env server: its requests in, its answers out, its limits.

Each connection numbers its own sessions. The requests of one session run in order (later
ones wait in the session's queue), those of different sessions independently. Per
connection the server bounds the requests waiting in queues and the bytes of answers the
client has not read: past the latter, the connection is dropped (a client that does not
read cannot make the server hold its answers). Request ids increase on each connection, so
a repeated id is refused and never runs a step twice. A malformed request gets an error
answer and costs nothing else. When the connection ends, its sessions are closed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

from palaestra.runner.network import FRAME_BYTES, encode_frame, encode_message
from palaestra.server.sessions import SessionKey, SessionTable
from palaestra.server.wire import (
    BAD_REQUEST,
    REPEATED_ID,
    Request,
    RequestError,
    is_index,
    parse_request,
)

if TYPE_CHECKING:
    from palaestra.server.websocket import DirectSocket

logger = logging.getLogger(__name__)

BUSY = "busy"
"""Error code of a request refused because its connection has too many waiting."""

BATCH_ANSWERS = 64
"""Answers given while one frame is read are encoded this many at a time, or fewer once their
observations reach :data:`FRAME_BYTES` characters (encoding them one by one costs more;
bytes are counted against the unread limit as each batch is encoded)."""

REQUESTS_PER_TURN = 512
"""Requests of one connection dispatched in one turn of the event loop; the rest of a
larger frame waits for later turns (its socket unread meanwhile)."""

CLOSE_TIMEOUT_S = 2.0
"""How long a closing handshake may take before the socket is dropped."""

_numbers = itertools.count()


class UnreadBudget:
    """The server-wide bound on answer bytes clients have not read: each connection reports
    what it holds as it sends; past ``limit`` in all, the connections holding the most are
    dropped until the rest fit."""

    def __init__(self, limit: int):
        self.limit = limit
        self.total = 0
        self._held: dict[Connection, int] = {}

    def hold(self, connection: Connection, unread: int) -> None:
        """Record that ``connection`` now holds ``unread`` bytes; enforce the limit."""
        self.total += unread - self._held.get(connection, 0)
        self._held[connection] = unread
        if self.total > self.limit:
            self._enforce()

    def forget(self, connection: Connection) -> None:
        self.total -= self._held.pop(connection, 0)

    def _enforce(self) -> None:
        """Measure every connection again (sockets drain between reports); drop the largest
        holders until the total fits."""
        held = {connection: connection.unread_bytes() for connection in self._held}
        self._held, self.total = held, sum(held.values())
        for connection in sorted(held, key=held.__getitem__, reverse=True):
            if self.total <= self.limit:
                break
            connection.drop(
                "unread",
                f"the server holds more than {self.limit} bytes of answers unread by its "
                "clients; this client held the most",
                reads=False,
            )


class Connection:
    """One client: reads request frames, runs them, sends the answers back in frames.

    Frames come and go through ``socket`` (:class:`~palaestra.server.websocket.DirectSocket`),
    in the event loop's callbacks; ``websocket`` (the ASGI one) serves the closing handshake
    and tells when the client has gone."""

    def __init__(
        self,
        websocket: Any,
        socket: DirectSocket,
        table: SessionTable,
        budget: UnreadBudget | None = None,
    ):
        self.websocket = websocket
        self.socket = socket
        self.table = table
        self.budget = budget or UnreadBudget(table.limits.max_unread_bytes_total)
        self.limits = table.limits
        self.number = next(_numbers)
        self.sessions: set[int] = set()
        """Numbers of the sessions opened (or being opened) on this connection."""
        self.last_active = time.monotonic()
        self.closing: str | None = None
        self._loop = asyncio.get_running_loop()
        self._queues: dict[int, deque[Request]] = {}
        self._queued = 0
        self._last_id = -1
        self._running: set[asyncio.Future[Any]] = set()
        self._outbox: list[str] = []
        self._outbox_bytes = 0
        self._flush_scheduled = False
        self._task: asyncio.Task[Any] | None = None
        self._closer: asyncio.Future[None] | None = None
        self._batch: list[dict[str, Any]] | None = None
        self._batch_chars = 0
        self._inbox: deque[Any] = deque()
        """Requests read and not dispatched yet (a frame is dispatched over several turns)."""
        self._draining = False

    def is_idle(self) -> bool:
        """Whether the client has no session and nothing in flight here (forgets the
        sessions the reaper closed)."""
        table = self.table
        open_now = {
            number
            for number in self.sessions
            if (self.number, number) in table.sessions or (self.number, number) in table.creating
        }
        if open_now != self.sessions:  # the reaper closed some: idle from now on at most
            self.sessions = open_now
            self.last_active = time.monotonic()
        return not (self.sessions or self._queues or self._running)

    async def serve(self) -> None:
        """Serve until the client leaves or the connection is dropped."""
        self._task = asyncio.current_task()
        self.socket.attach(self._frame_received)
        try:
            while self.closing is None:
                message = await self.websocket.receive()  # frames come through the socket
                if message["type"] == "websocket.disconnect":
                    break
                self._frame_received(message.get("text"))  # one that came through ASGI
        except asyncio.CancelledError:
            if self.closing is None:
                raise
        finally:
            for future in list(self._running):
                future.cancel()
            for number in self.sessions:
                self.table.close((self.number, number), "disconnect")
            self.budget.forget(self)

    def drop(self, reason: str, message: str, *, reads: bool = True) -> None:
        """End the connection (``reason`` is counted): a closing handshake with ``message``
        if the client ``reads`` and the socket takes it within :data:`CLOSE_TIMEOUT_S`,
        else the socket is dropped at once."""
        if self.closing is not None:
            return
        self.closing = reason
        self.table.counters[f"connections_dropped_{reason}"] += 1
        self._outbox.clear()
        self._outbox_bytes = 0
        self.budget.forget(self)
        self._closer = asyncio.ensure_future(self._close(message, reads))

    async def _close(self, message: str, reads: bool) -> None:
        try:
            if not reads:
                raise ConnectionAbortedError
            await asyncio.wait_for(self.websocket.close(1000, message), CLOSE_TIMEOUT_S)
        except Exception:  # the client does not read, or is gone
            self.socket.abort()
        if self._task is not None:
            self._task.cancel()

    def _frame_received(self, text: str | None) -> None:
        if self.closing is not None:
            return
        self.last_active = time.monotonic()
        if text is None:
            self._refuse(None, "frames are JSON text (a list of requests), not binary")
            return
        try:
            requests = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nesting past the parser's depth
            requests = None
        if not isinstance(requests, list):
            self._refuse(None, "a frame is a JSON list of requests")
            return
        self._inbox.extend(requests)
        if not self._draining:
            self._drain()

    def _drain(self) -> None:
        """Dispatch up to :data:`REQUESTS_PER_TURN` requests of the frames read; past that,
        stop reading the socket and go on in a later turn of the loop, so one client's huge
        frame never holds the other clients' requests for long."""
        inbox = self._inbox
        self._batch = []  # answers given now are encoded together, a few dozen at a time
        try:
            for _ in range(min(len(inbox), REQUESTS_PER_TURN)):
                if self.closing is not None:
                    inbox.clear()
                    break
                self._dispatch(inbox.popleft())
        finally:
            self._flush_batch()
            self._batch = None
        self._draining = bool(inbox)
        if inbox:
            self.socket.pause_reading()
            self._loop.call_soon(self._drain)
        else:
            self.socket.resume_reading()

    def _dispatch(self, raw: Any) -> None:
        request = self._checked(raw)
        if request is None:
            return
        queue = self._queues.get(request.session)
        if queue is not None:  # earlier requests of this session still run: keep their order
            if self._queued >= self.limits.max_queued_requests:
                self._refuse(
                    request.id,
                    f"{self._queued} requests already wait on this connection (the server's "
                    f"limit); wait for answers before sending more",
                    BUSY,
                )
                return
            queue.append(request)
            self._queued += 1
            return
        future = self._start(request)
        if future is not None:
            self._queues[request.session] = deque()
            self._track(request, future)

    def _checked(self, raw: Any) -> Request | None:
        """The request, or None when it was refused (with an error answer)."""
        if not isinstance(raw, dict):
            return self._refuse(None, "a request is a JSON object")
        request_id = raw.get("id")
        if not is_index(request_id):
            shown = request_id if isinstance(request_id, (str, int, float)) else None
            return self._refuse(shown, "a request's id is an integer >= 0")
        if request_id <= self._last_id:
            return self._refuse(
                request_id,
                f"request id {request_id} is not above this connection's last one "
                f"({self._last_id}): ids increase, and a repeated one never runs",
                REPEATED_ID,
            )
        self._last_id = request_id
        try:
            return parse_request(raw, request_id, self.limits.max_action_bytes)
        except RequestError as exc:
            self._answer_error(request_id, exc)
            return None

    def _start(self, request: Request) -> asyncio.Future[Any] | None:
        """Run ``request``: its future if it runs on, else None (answered already)."""
        key: SessionKey = (self.number, request.session)
        try:
            if request.op == "create":
                self.sessions.add(request.session)  # closed with the connection, even mid-create
                return asyncio.ensure_future(self.table.create(key, request.env, request.kwargs))
            if request.op == "close":
                self.sessions.discard(request.session)
                self.table.close_for_client(key)
                self._answer_ok(request.id, None)
                return None
            result = self.table.run(key, request)
        except Exception as exc:
            self._answer_error(request.id, exc, self._discreet(request.session))
            return None
        if isinstance(result, asyncio.Future):
            return result
        self._answer_ok(request.id, result)
        return None

    def _track(self, request: Request, future: asyncio.Future[Any]) -> None:
        self._running.add(future)
        future.add_done_callback(partial(self._finished, request))

    def _finished(self, request: Request, future: asyncio.Future[Any]) -> None:
        self._running.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            self._answer_ok(request.id, future.result())
        else:
            if request.op == "create" and (self.number, request.session) not in self.table.sessions:
                self.sessions.discard(request.session)
            self._answer_error(request.id, error, self._discreet(request.session))
        self._next(request.session)

    def _next(self, session: int) -> None:
        """Start the next waiting request of ``session`` (answering those that run now)."""
        queue = self._queues[session]
        while queue:
            request = queue.popleft()
            self._queued -= 1
            future = self._start(request)
            if future is not None:
                self._track(request, future)
                return
        del self._queues[session]

    def _refuse(self, request_id: Any, message: str, code: str = BAD_REQUEST) -> None:
        self._answer_error(request_id, RequestError(message, code))

    def _discreet(self, session: int) -> bool:
        found = self.table.sessions.get((self.number, session))
        return found is not None and found.discreet

    def _answer_error(self, request_id: Any, exc: BaseException, discreet: bool = False) -> None:
        self.table.counters["request_errors"] += 1
        if isinstance(exc, RequestError):
            answer = {"id": request_id, "error": str(exc), "code": exc.code}
        else:
            answer = {"id": request_id, "error": client_message(exc, discreet)}
        self._answer(answer)

    def _answer_ok(self, request_id: int, payload: Any) -> None:
        self._answer({"id": request_id, "ok": payload}, _observation_chars(payload))

    def _answer(self, answer: dict[str, Any], chars: int = 0) -> None:
        """Send ``answer`` now, or with the batch of the frame being read (``chars``: the
        size of its observation, which bounds the batch's bytes)."""
        batch = self._batch
        if batch is None:
            self._send(self._encoded([answer]))
            return
        batch.append(answer)
        self._batch_chars += chars
        if len(batch) >= BATCH_ANSWERS or self._batch_chars >= FRAME_BYTES:
            self._flush_batch()

    def _flush_batch(self) -> None:
        if self._batch:
            answers = self._batch.copy()
            self._batch.clear()
            self._batch_chars = 0
            self._send(self._encoded(answers))

    def _encoded(self, answers: list[dict[str, Any]]) -> str:
        """``answers`` as JSON list items (an answer that is not JSON becomes an error)."""
        try:
            return encode_frame(answers)[1:-1]
        except (TypeError, ValueError):
            return ",".join(map(self._encoded_alone, answers))

    def _encoded_alone(self, answer: dict[str, Any]) -> str:
        try:
            return encode_message(answer)
        except (TypeError, ValueError) as exc:
            self.table.counters["request_errors"] += 1
            error = f"RuntimeError: the env's answer is not JSON: {exc}"
            return encode_message({"id": answer.get("id"), "error": error})

    def _send(self, text: str) -> None:
        if self.closing is not None:
            return
        self._outbox.append(text)
        self._outbox_bytes += len(text)  # JSON text is ASCII: characters are bytes
        unread = self.unread_bytes()
        if unread > self.limits.max_unread_bytes:
            self.drop(
                "unread",
                f"more than {self.limits.max_unread_bytes} bytes of answers unread",
                reads=False,
            )
            return
        self.budget.hold(self, unread)
        if self.closing is not None:
            return
        if not self._flush_scheduled:  # answers given in this turn of the loop go together
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def unread_bytes(self) -> int:
        """Bytes of answers given that the client has not taken yet."""
        return self._outbox_bytes + self.socket.unsent_bytes()

    def _flush(self) -> None:
        self._flush_scheduled = False
        while self._outbox and self.closing is None:
            self.socket.send("[" + ",".join(self._take_frame()) + "]")

    def _take_frame(self) -> list[str]:
        """The answers of the next frame (about :data:`FRAME_BYTES` at most)."""
        if self._outbox_bytes <= FRAME_BYTES:
            texts, self._outbox = self._outbox, []
            self._outbox_bytes = 0
            return texts
        size = count = 0
        for text in self._outbox:
            if count and size + len(text) > FRAME_BYTES:
                break
            size += len(text)
            count += 1
        texts = self._outbox[:count]
        del self._outbox[:count]
        self._outbox_bytes -= size
        return texts


def _observation_chars(payload: Any) -> int:
    """The length of the observation a reset or step answer carries (its first item)."""
    if isinstance(payload, (list, tuple)) and payload and isinstance(payload[0], str):
        return len(payload[0])
    return 0


def client_message(exc: BaseException, discreet: bool = False) -> str:
    """What a client learns of an env's error: its type and message, except for errors of
    the operating system (files, sockets) and errors of ``discreet`` sessions (built with
    kwargs the client chose, such as a path), which could tell what exists on the server."""
    if discreet or isinstance(exc, OSError):
        logger.warning("env error hidden from the client: %r", exc)
        return "the env failed on the server (its log has the error)"
    return f"{type(exc).__name__}: {exc}"
