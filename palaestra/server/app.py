"""The env server's web app: WebSocket sessions, ``/health`` and Prometheus ``/metrics``.

Protocol in :mod:`palaestra.runner.network`; one client's connection in
:mod:`palaestra.server.connection`. The server holds at most ``max_connections``
connections (sockets past that many, handshaking or open, are dropped as they connect,
with a few more for the HTTP routes); a reaper closes sessions idle past the limit, and
connections that have had no session and no request for as long, and hands the memory of
closed sessions back to the system (:mod:`palaestra.server.memory`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, WebSocket
from fastapi.responses import JSONResponse, PlainTextResponse

from palaestra.runner.network import ACTION_LIMIT_HEADER
from palaestra.server import memory
from palaestra.server.access import BearerAuth
from palaestra.server.connection import Connection, UnreadBudget
from palaestra.server.sessions import SessionTable
from palaestra.server.websocket import SOCKET_EXTENSION
from palaestra.server.wire import OPS

CLOSE_REASONS = ("client", "idle", "disconnect", "shutdown")
DROP_REASONS = ("idle", "unread")


def create_app(table: SessionTable, *, token: str | None = None) -> FastAPI:
    """The app serving ``table``'s sessions; with ``token``, every route but ``/health``
    needs ``Authorization: Bearer <token>`` (the API docs and schema too)."""
    connections: set[Connection] = set()
    budget = UnreadBudget(table.limits.max_unread_bytes_total)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap_idle(table, connections))
        try:
            yield
        finally:
            reaper.cancel()
            await table.shutdown()

    app = FastAPI(title="palaestra env server", lifespan=lifespan)
    if token is not None:
        app.add_middleware(BearerAuth, token=token)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "sessions": len(table.sessions)}

    @app.get("/metrics")
    async def metrics() -> Any:
        return PlainTextResponse(render_metrics(table, len(connections)))

    @app.websocket("/sessions")
    async def sessions(websocket: WebSocket) -> None:
        if len(connections) >= table.limits.max_connections:
            table.counters["connections_refused"] += 1
            limit = table.limits.max_connections
            message = f"the server is at its limit of {limit} connections; try again later"
            await _refuse(websocket, message)
            return
        socket = websocket.scope.get("extensions", {}).get(SOCKET_EXTENSION)
        if socket is None:
            await _refuse(websocket, "sessions need the server of palaestra.server.build_server")
            return
        limit_header = (ACTION_LIMIT_HEADER.encode(), str(table.limits.max_action_bytes).encode())
        await websocket.accept(headers=[limit_header])
        connection = Connection(websocket, socket, table, budget)
        connections.add(connection)
        try:
            await connection.serve()
        finally:
            connections.discard(connection)

    return app


async def _refuse(websocket: WebSocket, message: str) -> None:
    """Refuse a WebSocket handshake with 503 and ``message`` (close code 1013 where the
    server cannot send an HTTP answer)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"error": message}, status_code=503))
    else:
        await websocket.close(code=1013, reason=message)


async def _reap_idle(table: SessionTable, connections: set[Connection]) -> None:
    """Every few seconds: close idle sessions and connections; when sessions have closed
    (for any reason) and fewer are open than at their peak, hand the memory their envs
    freed back to the system, on that pass and the next (an env closes on its session's
    thread, maybe after the first). Sessions replaced as fast as they close (a client's
    unhealthy ones) reuse that memory instead: no trim then."""
    idle_s = table.limits.idle_timeout_s
    closed_before = peak = trims_due = 0
    while True:
        await asyncio.sleep(min(5.0, idle_s / 4))
        table.close_idle()
        deadline = time.monotonic() - idle_s
        for connection in list(connections):
            if connection.is_idle() and connection.last_active < deadline:
                connection.drop("idle", f"no session and no request for {idle_s:g} s")
        closed = sum(table.counters[f"sessions_closed_{reason}"] for reason in CLOSE_REASONS)
        open_now = len(table.sessions)
        if closed != closed_before and open_now < peak:
            trims_due, peak = 2, open_now
        closed_before, peak = closed, max(peak, open_now)
        if trims_due:
            trims_due -= 1
            await asyncio.to_thread(memory.trim)


def render_metrics(table: SessionTable, connections: int) -> str:
    """The server's counters in the Prometheus text format."""
    counters = table.counters
    lines = [
        "# TYPE palaestra_sessions_open gauge",
        f"palaestra_sessions_open {len(table.sessions)}",
        "# TYPE palaestra_sessions_creating gauge",
        f"palaestra_sessions_creating {len(table.creating)}",
        "# TYPE palaestra_connections_open gauge",
        f"palaestra_connections_open {connections}",
        "# TYPE palaestra_uptime_seconds gauge",
        f"palaestra_uptime_seconds {time.monotonic() - table.started:.3f}",
        "# TYPE palaestra_requests_total counter",
    ]
    for op in OPS:
        lines.append(f'palaestra_requests_total{{op="{op}"}} {counters[f"requests_{op}"]}')
    for name in ("request_errors", "sessions_opened", "sessions_refused", "connections_refused"):
        lines.append(f"# TYPE palaestra_{name}_total counter")
        lines.append(f"palaestra_{name}_total {counters[name]}")
    lines.append("# TYPE palaestra_sessions_closed_total counter")
    for reason in CLOSE_REASONS:
        value = counters[f"sessions_closed_{reason}"]
        lines.append(f'palaestra_sessions_closed_total{{reason="{reason}"}} {value}')
    lines.append("# TYPE palaestra_connections_dropped_total counter")
    for reason in DROP_REASONS:
        value = counters[f"connections_dropped_{reason}"]
        lines.append(f'palaestra_connections_dropped_total{{reason="{reason}"}} {value}')
    return "\n".join(lines) + "\n"
