"""HTTP guards of palaestra's servers: a cap on request bodies and a deadline for receiving
each request, so that no client can hold the server with a huge or a slow request.

* :func:`read_body` reads a request body up to a size limit: a ``Content-Length`` over the
  limit is refused before anything is read, and a chunked body stops being read as soon as
  it passes the limit (:class:`BodyTooLarge`).
* :func:`deadline_protocol` extends uvicorn's HTTP protocol: a connection must deliver a
  whole request (headers and body, or a WebSocket's handshake) within ``request_timeout_s``
  of connecting or of its previous response, else it is closed; optionally, sockets past a
  cap are dropped as they connect. That ends slowloris clients (headers or body
  trickled a byte at a time, or nothing sent at all), which uvicorn alone keeps open
  forever; a request the app is still answering is never cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request


class BodyTooLarge(Exception):
    """A request body over the server's limit."""

    def __init__(self, limit: int):
        super().__init__(f"the request body is over this server's limit of {limit} bytes")
        self.limit = limit


async def read_body(request: Request, limit: int) -> bytes:
    """The body of ``request``, or :class:`BodyTooLarge` once it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class _RequestDeadline:
    """Mixin over a uvicorn HTTP protocol class (see :func:`deadline_protocol`)."""

    request_timeout_s: float = 30.0
    max_sockets: int | None = None
    on_refused: Any = None
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        limit = self.max_sockets
        if limit is not None and len(self.connections) > limit:  # type: ignore[attr-defined]
            transport.abort()  # past the cap: refused before a byte is read
            if self.on_refused is not None:
                self.on_refused()
            return
        self._arm()

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._disarm()  # the WebSocket protocol owns the connection from here
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout_s, self._expire)  # type: ignore[attr-defined]

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        """Close the connection if it is still receiving a request (or has sent none)."""
        self._deadline = None
        cycle = self.cycle  # type: ignore[attr-defined]
        if cycle is None or cycle.response_complete or cycle.more_body:
            self.transport.close()  # type: ignore[attr-defined]


def deadline_protocol(
    request_timeout_s: float,
    *,
    max_sockets: int | None = None,
    on_refused: Callable[[], None] | None = None,
) -> type:
    """uvicorn's HTTP protocol class (httptools when installed, else h11) with a deadline of
    ``request_timeout_s`` seconds for receiving each request (a WebSocket's handshake
    request too); pass it as ``uvicorn.Config(http=...)``. With ``max_sockets``, a
    connection that would make more sockets open (requests being received, answered, and
    WebSockets) is dropped at once, and ``on_refused`` called."""
    if request_timeout_s <= 0:
        raise ValueError(f"request_timeout_s must be > 0, got {request_timeout_s}")
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # httptools is missing: uvicorn's pure-Python protocol
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    settings = {
        "request_timeout_s": float(request_timeout_s),
        "max_sockets": max_sockets,
        "on_refused": staticmethod(on_refused) if on_refused is not None else None,
    }
    return type(f"Deadline{base.__name__}", (_RequestDeadline, base), settings)
