"""The env server's web app: WebSocket sessions, ``/health`` and Prometheus ``/metrics``.

Protocol in :mod:`palaestra.runner.network`. Each connection numbers its own sessions; the
requests of one session run in order, those of different sessions independently. When a
connection ends, its sessions are closed; sessions idle past the limit are closed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, PlainTextResponse

from palaestra.runner.network import encode_frame
from palaestra.server.sessions import OPS, RequestError, SessionKey, SessionTable

_connection_numbers = itertools.count()


def create_app(table: SessionTable, *, token: str | None = None) -> FastAPI:
    """The app serving ``table``'s sessions; with ``token``, clients must send
    ``Authorization: Bearer <token>`` (``/health`` stays open, for load balancers)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap_idle(table))
        try:
            yield
        finally:
            reaper.cancel()
            for key in list(table.sessions):
                await table.close(key, "shutdown")

    app = FastAPI(title="palaestra env server", lifespan=lifespan)

    def authorized(headers: Any) -> bool:
        if token is None:
            return True
        sent = headers.get("authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "sessions": len(table.sessions)}

    @app.get("/metrics")
    async def metrics(request: Request) -> Any:
        if not authorized(request.headers):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        return PlainTextResponse(render_metrics(table))

    @app.websocket("/sessions")
    async def sessions(websocket: WebSocket) -> None:
        if not authorized(websocket.headers):
            await websocket.close(code=1008, reason="missing or wrong bearer token")
            return
        await websocket.accept()
        await _Connection(websocket, table).serve()

    return app


async def _reap_idle(table: SessionTable) -> None:
    period = min(5.0, table.limits.idle_timeout_s / 4)
    while True:
        await asyncio.sleep(period)
        await table.close_idle()


class _Connection:
    """One client: reads request frames, runs them, sends the answers back in frames."""

    def __init__(self, websocket: WebSocket, table: SessionTable):
        self.websocket = websocket
        self.table = table
        self.number = next(_connection_numbers)
        self.keys: set[SessionKey] = set()
        self.queues: dict[SessionKey, deque[dict[str, Any]]] = {}
        self.outbox: list[dict[str, Any]] = []
        self.wake = asyncio.Event()
        self.workers: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        self.table.connections += 1
        writer = asyncio.create_task(self._write())
        try:
            while True:
                frame = await self.websocket.receive_text()
                try:
                    requests = json.loads(frame)
                except ValueError:
                    requests = None
                if not isinstance(requests, list):
                    await self.websocket.close(code=1003, reason="a frame is a JSON list")
                    return
                for request in requests:
                    self._dispatch(request)
        except WebSocketDisconnect:
            pass
        finally:
            self.table.connections -= 1
            writer.cancel()
            for worker in self.workers:
                worker.cancel()
            for key in list(self.keys):
                await self.table.close(key, "disconnect")

    def _dispatch(self, request: Any) -> None:
        """Answer at once where the env steps inline; else queue behind the session's work."""
        if not isinstance(request, dict):
            return self._fail(None, RequestError("a request is a JSON object"))
        request_id = request.get("id")
        key = (self.number, request.get("session"))
        queue = self.queues.get(key)
        if queue is not None:  # earlier requests of this session still run: keep their order
            queue.append(request)
            return None
        try:
            result = self.table.execute_inline(key, request)
        except Exception as exc:
            return self._fail(request_id, exc)
        if result is not None:
            return self._answer({"id": request_id, "ok": result})
        self.queues[key] = deque([request])
        worker = asyncio.create_task(self._drain(key))
        self.workers.add(worker)
        worker.add_done_callback(self.workers.discard)
        return None

    async def _drain(self, key: SessionKey) -> None:
        queue = self.queues[key]
        try:
            while queue:
                request = queue[0]
                op = request.get("op")
                if op == "create":
                    self.keys.add(key)  # closed with the connection, even mid-create
                try:
                    result = await self.table.execute(key, request)
                except Exception as exc:
                    self._fail(request.get("id"), exc)
                else:
                    self._answer({"id": request.get("id"), "ok": result})
                    if op == "close":
                        self.keys.discard(key)
                queue.popleft()
        finally:
            del self.queues[key]

    def _fail(self, request_id: Any, exc: Exception) -> None:
        self.table.counters["request_errors"] += 1
        if isinstance(exc, RequestError):
            answer = {"id": request_id, "error": str(exc), "code": exc.code}
        else:
            answer = {"id": request_id, "error": f"{type(exc).__name__}: {exc}"}
        self._answer(answer)

    def _answer(self, answer: dict[str, Any]) -> None:
        self.outbox.append(answer)
        self.wake.set()

    async def _write(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.outbox:
                answers, self.outbox = self.outbox, []
                await self.websocket.send_text(encode_frame(answers))


def render_metrics(table: SessionTable) -> str:
    """The server's counters in the Prometheus text format."""
    lines = [
        "# TYPE palaestra_sessions_open gauge",
        f"palaestra_sessions_open {len(table.sessions)}",
        "# TYPE palaestra_connections_open gauge",
        f"palaestra_connections_open {table.connections}",
        "# TYPE palaestra_uptime_seconds gauge",
        f"palaestra_uptime_seconds {time.monotonic() - table.started:.3f}",
        "# TYPE palaestra_requests_total counter",
    ]
    counters = table.counters
    for op in OPS:
        lines.append(f'palaestra_requests_total{{op="{op}"}} {counters[f"requests_{op}"]}')
    lines.append("# TYPE palaestra_request_errors_total counter")
    lines.append(f"palaestra_request_errors_total {counters['request_errors']}")
    lines.append("# TYPE palaestra_sessions_opened_total counter")
    lines.append(f"palaestra_sessions_opened_total {counters['sessions_opened']}")
    lines.append("# TYPE palaestra_sessions_refused_total counter")
    lines.append(f"palaestra_sessions_refused_total {counters['sessions_refused']}")
    lines.append("# TYPE palaestra_sessions_closed_total counter")
    for reason in ("client", "idle", "disconnect", "shutdown"):
        value = counters[f"sessions_closed_{reason}"]
        lines.append(f'palaestra_sessions_closed_total{{reason="{reason}"}} {value}')
    return "\n".join(lines) + "\n"
