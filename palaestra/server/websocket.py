"""The WebSocket protocol the env server runs on: uvicorn's, with a direct path for frames.

uvicorn hands each frame to the ASGI app through a queue and takes each answer through a
``send`` coroutine, which costs the app a task wake-up per frame each way (and uvicorn a
pause and resume of the socket's reading). The sessions endpoint instead attaches to the
connection's :class:`DirectSocket`: frames reach it in the transport's callback, and its
answers are framed and written at once. The handshake, the HTTP routes, keepalive pings,
the closing handshake and shutdown stay uvicorn's and ASGI's. Should a uvicorn release stop
calling the hook overridden here, frames would reach the connection through ASGI's queue,
which it still reads: slower, not wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

SOCKET_EXTENSION = "palaestra.socket"
"""ASGI scope extension of the env server's WebSockets: the connection's
:class:`DirectSocket`."""


class DirectSocket:
    """One WebSocket connection's frames, outside ASGI's queue and ``send`` coroutine."""

    def __init__(self, protocol: SessionsProtocol):
        self._protocol = protocol
        self.on_frame: Callable[[str | None], None] | None = None

    def attach(self, on_frame: Callable[[str | None], None]) -> None:
        """Deliver every later data frame to ``on_frame``, in the transport's callback: its
        text, or None for a binary frame or one that is not UTF-8."""
        self.on_frame = on_frame

    def send(self, text: str) -> None:
        """Write one text frame now (the transport buffers what the socket cannot take);
        nothing once the connection is closing."""
        protocol = self._protocol
        conn = protocol.conn
        if protocol.close_sent or protocol.disconnected or conn.state is not State.OPEN:
            return
        conn.send_text(text.encode())
        protocol.transport.write(b"".join(conn.data_to_send()))

    def unsent_bytes(self) -> int:
        """Bytes written that the client has not taken yet (beyond the kernel's buffers)."""
        return self._protocol.transport.get_write_buffer_size()

    def pause_reading(self) -> None:
        """Stop reading frames until :meth:`resume_reading` (or uvicorn's closing handshake)."""
        protocol = self._protocol
        if not protocol.read_paused and not protocol.transport.is_closing():
            protocol.read_paused = True
            protocol.transport.pause_reading()

    def resume_reading(self) -> None:
        protocol = self._protocol
        if protocol.read_paused and not protocol.transport.is_closing():
            protocol.read_paused = False
            protocol.transport.resume_reading()

    def abort(self) -> None:
        """Drop the socket at once, without a closing handshake."""
        self._protocol.transport.abort()


class SessionsProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, giving the app the connection's :class:`DirectSocket`."""

    direct: DirectSocket | None = None

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # absent when the handshake was refused
        if scope is not None:
            self.direct = DirectSocket(self)
            scope["extensions"][SOCKET_EXTENSION] = self.direct

    def send_receive_event_to_app(self) -> None:
        direct = self.direct
        if direct is None or direct.on_frame is None:
            super().send_receive_event_to_app()
            return
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.close_sent:  # the app is past its closing handshake
            return
        text = None
        if self.curr_msg_data_type == "text":
            with contextlib.suppress(UnicodeDecodeError):
                text = data.decode()
        direct.on_frame(text)

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            # A refused handshake (401, 503) is complete; uvicorn would log it as an error.
            self.handshake_complete = True
