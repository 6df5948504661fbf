"""Envs served by ``palaestra serve``: the wire protocol and the client env host.

Transport: one WebSocket per client (per event loop), with every env session of that client
multiplexed over it. Each request carries an ``id`` that its response echoes, so responses
are matched by id, never by arrival order: an answer that arrives after its request timed
out is dropped (and counted), never taken for the next one. Requests queued within one turn
of the event loop go out as one frame (a JSON list), and the server answers in frames too,
so per-message framing costs are shared by every session stepping at that moment; HTTP would
pay headers, routing and a response per step.

Requests: ``create`` (env id + kwargs), ``reset`` (seed, options), ``step`` (action) and
``close``, each naming its ``session`` (numbered by the client, per connection). Responses:
``{"id": n, "ok": payload}`` or ``{"id": n, "error": message, "code": ...}``.

A request that times out, a dropped connection or a server restart fails that episode's call
with :class:`EnvServerError`, which the runner records as an errored episode; the run goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import defaultdict
from typing import Any

from palaestra.core.env import ResetResult, StepResult
from palaestra.runner.tasks import Task

TOKEN_ENV_VAR = "PALAESTRA_ENV_SERVER_TOKEN"
"""Where clients and ``palaestra serve`` read the bearer token when none is passed."""

METADATA = ("system_prompt", "tools", "tool_format", "max_turns")
"""Env attributes a reset response carries (the runner's view of the env)."""

FRAME_BYTES = 1 << 20
"""A client starts a new frame past this many bytes of queued requests."""


NO_SESSION = "no_session"
"""Error code of an answer about a session the server does not have (closed while idle)."""


class EnvServerError(RuntimeError):
    """A request to the env server failed: an error answer (with the server's ``code``, if
    any), a timeout or a lost connection."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


def encode_frame(messages: list[dict[str, Any]]) -> str:
    """One frame: a JSON list of messages (numpy scalars and other non-JSON values as text)."""
    return json.dumps(messages, separators=(",", ":"), default=_jsonable)


def _jsonable(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if item is not None:
        return item()
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if tolist is not None:
        return tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def websocket_url(url: str) -> str:
    """The sessions endpoint of a server given as ``http(s)://`` or ``ws(s)://host:port``."""
    url = url.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(plain):
            url = secure + url.removeprefix(plain)
    if not url.startswith(("ws://", "wss://")):
        raise ValueError(
            f"env server URL must start with http://, https://, ws:// or wss://: {url!r}"
        )
    return url if url.endswith("/sessions") else f"{url}/sessions"


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


class _Link:
    """One WebSocket connection: sends queued requests as frames, matches answers by id."""

    def __init__(self, ws: Any, timeout_s: float):
        self.ws = ws
        self.timeout_s = timeout_s
        self.alive = True
        self.late_answers = 0
        self.sessions = itertools.count()
        self._ids = itertools.count()
        self._pending: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._outbox: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._failure = "connection closed"
        self._tasks = [
            asyncio.create_task(self._read()),
            asyncio.create_task(self._write()),
            asyncio.create_task(self._expire()),
        ]

    def request(self, op: str, session: int, **fields: Any) -> asyncio.Future[Any]:
        """Queue one request; the future gets its answer's payload or an EnvServerError."""
        future = asyncio.get_running_loop().create_future()
        if not self.alive:
            future.set_exception(EnvServerError(f"env server {self._failure}"))
            return future
        request_id = next(self._ids)
        self._pending[request_id] = (future, time.monotonic() + self.timeout_s)
        self._outbox.append({"id": request_id, "op": op, "session": session, **fields})
        self._wake.set()
        return future

    def notify(self, op: str, session: int, **fields: Any) -> None:
        """Queue a request whose answer nobody waits for (closing a session)."""
        if self.alive:
            self.request(op, session, **fields).add_done_callback(_retrieve)

    async def _write(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._outbox:
                    queued, self._outbox = self._outbox, []
                    for frame in _frames(queued):
                        await self.ws.send(encode_frame(frame))
        except Exception as exc:
            self._fail(f"connection failed: {exc!r}")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                for answer in json.loads(frame):
                    entry = self._pending.pop(answer["id"], None)
                    if entry is None or entry[0].done():
                        self.late_answers += 1
                    elif "error" in answer:
                        error = EnvServerError(answer["error"], answer.get("code"))
                        entry[0].set_exception(error)
                    else:
                        entry[0].set_result(answer["ok"])
            self._fail("closed the connection")
        except asyncio.CancelledError:
            # Also how a finished ``asyncio.run`` ends its tasks: drop the socket now, so the
            # server closes this connection's sessions instead of waiting for their idle time.
            self.ws.transport.abort()
            raise
        except Exception as exc:
            self._fail(f"connection lost: {exc!r}")

    async def _expire(self) -> None:
        """Fail requests past their deadline (one sweep a fraction of the timeout)."""
        period = min(1.0, self.timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            expired = [rid for rid, (_, deadline) in self._pending.items() if deadline <= now]
            for request_id in expired:
                future, _ = self._pending.pop(request_id)
                if not future.done():
                    future.set_exception(
                        EnvServerError(f"env server gave no answer within {self.timeout_s:g} s")
                    )

    def _fail(self, reason: str) -> None:
        if not self.alive:
            return
        self.alive = False
        self._failure = reason
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(EnvServerError(f"env server {reason}"))
        self._pending.clear()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    async def close(self) -> None:
        self._fail("connection closed by the client")
        await self.ws.close()


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's failure as seen (its caller does not wait for it)."""
    if not future.cancelled():
        future.exception()


class NetworkEnv:
    """One env session on an env server: an env handle (``areset``/``astep`` + metadata).

    The session is created on the first ``areset``; a request that fails leaves the handle
    broken (its session's state is unknown), so later calls fail at once.
    """

    steps_inline = False

    def __init__(self, client: EnvServerClient, env_id: str, env_kwargs: dict[str, Any]):
        self._client = client
        self._env_id, self._env_kwargs = env_id, env_kwargs
        self._link: _Link | None = None
        self._session = -1
        self._broken: str | None = None
        self.system_prompt: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.tool_format = "hermes"
        self.max_turns: int | None = None

    @property
    def usable(self) -> bool:
        """Whether the session is open on a live connection and no request of it failed."""
        return self._broken is None and self._link is not None and self._link.alive

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._check()
        if self._link is not None:  # a session reused from an earlier episode
            reset = self._link.request("reset", self._session, seed=seed, options=options)
            try:
                return self._started(await reset)
            except EnvServerError as exc:
                if exc.code != NO_SESSION:
                    self._broken = f"session unusable after an earlier failure: {exc}"
                    raise
                # The server closed it while it sat idle in the client's pool: open another.
        self._link = await self._client.link()
        self._session = next(self._link.sessions)
        created = self._link.request(
            "create", self._session, env=self._env_id, kwargs=self._env_kwargs
        )
        reset = self._link.request("reset", self._session, seed=seed, options=options)
        reset.add_done_callback(_retrieve)  # fails too when the create fails
        await self._call(created)
        return self._started(await self._call(reset))

    def _started(self, answer: list[Any]) -> ResetResult:
        obs, info, meta = answer
        for name in METADATA:
            setattr(self, name, meta[name])
        return obs, info

    async def astep(self, action: str) -> StepResult:
        self._check()
        if self._link is None:
            raise EnvServerError("step before reset")
        obs, reward, terminated, truncated, info = await self._call(
            self._link.request("step", self._session, action=action)
        )
        return obs, reward, terminated, truncated, info

    def _check(self) -> None:
        if self._broken is not None:
            raise EnvServerError(self._broken)

    async def _call(self, future: asyncio.Future[Any]) -> Any:
        try:
            return await future
        except EnvServerError as exc:
            self._broken = f"session unusable after an earlier failure: {exc}"
            raise

    def close(self) -> None:
        """Close the session on the server (without waiting for its answer)."""
        if self._link is not None:
            self._link.notify("close", self._session)
            self._link = None


class EnvServerClient:
    """An env host whose envs live on a ``palaestra serve`` server.

    ``token`` defaults to ``$PALAESTRA_ENV_SERVER_TOKEN``; ``timeout_s`` bounds every request
    (a slow or silent server fails that episode instead of hanging the run). Sessions of
    clean episodes are reused by later tasks of the same env id and kwargs.

    >>> host = EnvServerClient("http://127.0.0.1:8765")  # doctest: +SKIP
    >>> episodes = Runner(agent, host=host).run(tasks)  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
    ):
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be > 0")
        self.url = websocket_url(url)
        self.token = token if token is not None else os.environ.get(TOKEN_ENV_VAR)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._link: _Link | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Lock | None = None
        self._last_failure = (-float("inf"), "")
        self._free: dict[tuple, list[NetworkEnv]] = defaultdict(list)

    @property
    def late_answers(self) -> int:
        """Answers dropped because their request had already timed out (this connection)."""
        return 0 if self._link is None else self._link.late_answers

    async def link(self) -> _Link:
        """The live connection of the running event loop, opened (or reopened) on demand."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # connections cannot outlive their loop
            self._link, self._loop, self._connecting = None, loop, asyncio.Lock()
            self._free.clear()
        assert self._connecting is not None
        async with self._connecting:
            if self._link is None or not self._link.alive:
                failed_at, failure = self._last_failure
                if time.monotonic() - failed_at < self.connect_timeout_s:
                    # Episodes waiting to connect fail together, not one timeout after another.
                    raise EnvServerError(failure)
                try:
                    self._link = await self._connect()
                except EnvServerError as exc:
                    self._last_failure = (time.monotonic(), str(exc))
                    raise
        return self._link

    async def _connect(self) -> _Link:
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            ws = await asyncio.wait_for(
                connect(
                    self.url,
                    additional_headers=headers,
                    max_size=None,
                    compression=None,
                    ping_interval=20,
                    ping_timeout=max(20.0, self.timeout_s),
                ),
                self.connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            raise EnvServerError(f"cannot reach the env server at {self.url}: {exc!r}") from exc
        except Exception as exc:  # the handshake was refused (bad token, wrong path)
            raise EnvServerError(f"env server at {self.url} refused the connection: {exc}") from exc
        return _Link(ws, self.timeout_s)

    def acquire(self, task: Task) -> NetworkEnv:
        free = self._free[task.env_key]
        while free:
            handle = free.pop()
            if handle.usable:
                return handle
        return NetworkEnv(self, task.env_id, dict(task.env_kwargs))

    def release(self, task: Task, handle: NetworkEnv, *, healthy: bool) -> None:
        if healthy and handle.usable:
            self._free[task.env_key].append(handle)
        else:
            handle.close()

    async def aclose(self) -> None:
        """Close the connection (the server closes its sessions); call from the run's loop."""
        link, self._link = self._link, None
        self._free.clear()
        if link is not None and self._loop is asyncio.get_running_loop():
            await link.close()

    def close(self) -> None:
        """Forget the connection; the server closes its sessions when the socket goes away.
        Prefer :meth:`aclose` from inside the event loop that ran the episodes."""
        self._link = None
        self._free.clear()

    async def __aenter__(self) -> EnvServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
