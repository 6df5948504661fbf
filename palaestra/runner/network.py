"""Envs served by ``palaestra serve``: the wire protocol and the client env host.

Transport: one WebSocket per client and event loop, with every env session of that client
multiplexed over it. Connections and pooled sessions belong to the event loop that opened
them (a second ``asyncio.run`` on the same client opens its own), and every request has a
deadline kept by a timer of that loop, so no request waits longer than ``timeout_s``
whatever the connection does. Each request carries an ``id`` that its response echoes, so responses
are matched by id, never by arrival order: an answer that arrives after its request timed
out is dropped (and counted), never taken for the next one. Requests queued within one turn
of the event loop go out as one frame (a JSON list), and the server answers in frames too,
so per-message framing costs are shared by every session stepping at that moment; HTTP would
pay headers, routing and a response per step.

Requests: ``create`` (env id + kwargs), ``reset`` (seed, options), ``step`` (an ``action``,
or ``play``: a policy of :data:`SERVER_POLICIES` the server plays from the env's own state)
and ``close``, each naming its ``session`` (numbered by the client, per connection). Ids are
integers that increase on each connection: the server refuses a repeated one, so a request
never runs twice. Responses: ``{"id": n, "ok": payload}`` or ``{"id": n, "error": message,
"code": ...}``. The handshake's answer announces the server's action limit
(:data:`ACTION_LIMIT_HEADER`), so a larger action is refused here and never sent.

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

TOO_LARGE = "too_large"
"""Error code of a request refused for its size (an action past the server's limit)."""

ACTION_LIMIT_HEADER = "x-palaestra-max-action-bytes"
"""Response header of the WebSocket handshake: the server's limit on one action, so that
clients refuse a larger action themselves (the request never reaches the wire)."""

SERVER_POLICIES = ("oracle", "random")
"""Policies the server can play from the env's own state (``step`` with ``play``)."""

PLAYED_BY = "played_by"
"""``info`` key of a step the server played: the policy's name."""


class EnvServerError(RuntimeError):
    """A request to the env server failed: an error answer (with the server's ``code``, if
    any), a timeout or a lost connection."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


def encode_frame(messages: list[dict[str, Any]]) -> str:
    """One frame: a JSON list of messages (numpy scalars and other non-JSON values as text)."""
    return _ENCODER.encode(messages)


def encode_message(message: dict[str, Any]) -> str:
    """One message as JSON text (ASCII), to be joined into a frame."""
    return _ENCODER.encode(message)


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


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_jsonable)


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
    """One WebSocket connection of one event loop: sends queued requests as frames, matches
    answers by id, and fails each request still unanswered at its deadline.

    Deadlines are kept by a timer of the event loop, so they hold whatever the connection
    does: a server that never answers, never reads, or a socket that hangs. Every request
    of a link has the same timeout, so deadlines come in id order and one timer, set for
    the oldest pending request, serves them all.
    """

    def __init__(self, ws: Any, timeout_s: float, max_action_bytes: int | None):
        self.loop = asyncio.get_running_loop()
        self.ws = ws
        self.timeout_s = timeout_s
        self.max_action_bytes = max_action_bytes
        """The server's limit on one action (UTF-8 bytes), if it announced one."""
        self.late_answers = 0
        self.sessions = itertools.count()
        self._open = True
        self._ids = itertools.count()
        self._pending: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._outbox: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._sending_since: float | None = None
        self._failure = "connection closed"
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]

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
            future.set_exception(EnvServerError(f"env server {reason}"))
            return future
        loop = self.loop
        future = loop.create_future()
        request_id = next(self._ids)
        deadline = loop.time() + self.timeout_s
        self._pending[request_id] = (future, deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        self._outbox.append({"id": request_id, "op": op, "session": session, **fields})
        self._wake.set()
        return future

    def notify(self, op: str, session: int, **fields: Any) -> None:
        """Queue a request whose answer nobody waits for (closing a session)."""
        if self.alive:
            self.request(op, session, **fields).add_done_callback(_retrieve)

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
        since = self._sending_since
        if since is not None and now - since >= self.timeout_s:
            self._fail(f"took no data for {self.timeout_s:g} s")

    async def _write(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._outbox:
                    queued, self._outbox = self._outbox, []
                    for frame in _frames(queued):
                        self._sending_since = self.loop.time()
                        await self.ws.send(encode_frame(frame))
                    self._sending_since = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(f"connection failed: {exc!r}")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                for answer in json.loads(frame):
                    self._settle(answer)
            self._fail(f"closed the connection{_close_reason(self.ws)}")
        except asyncio.CancelledError:
            # Also how a finished ``asyncio.run`` ends its tasks: drop the socket now, so the
            # server closes this connection's sessions instead of waiting for their idle time.
            self._fail("connection closed with its event loop")
            raise
        except Exception as exc:
            self._fail(f"connection lost: {exc!r}{_close_reason(self.ws)}")

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

    def _fail(self, reason: str) -> None:
        """Fail every pending request and drop the socket (the server then closes this
        connection's sessions at once)."""
        if not self._open:
            return
        self._open = False
        self.ws.transport.abort()
        self._failure = reason
        if self._timer is not None:
            self._timer.cancel()
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(EnvServerError(f"env server {reason}"))
        self._pending.clear()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    async def close(self) -> None:
        self._fail("connection closed by the client")


def _close_reason(ws: Any) -> str:
    reason = getattr(ws, "close_reason", None)
    return f" ({reason})" if reason else ""


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's failure as seen (its caller does not wait for it)."""
    if not future.cancelled():
        future.exception()


def size_error(what: str, text: str, limit: int) -> str | None:
    """The error message when ``text`` is over ``limit`` UTF-8 bytes, else None (encoded
    only when it might be over)."""
    if len(text) * 4 > limit and len(text.encode()) > limit:
        return f"{what} of {len(text.encode())} bytes exceeds the server's limit of {limit}"
    return None


class NetworkEnv:
    """One env session on an env server: an env handle (``areset``/``astep`` + metadata).

    The session is created on the first ``areset`` (and again when its connection is gone);
    a request that fails leaves the handle broken (its session's state is unknown), so later
    calls fail at once. ``aplay`` has the server pick the action from the env's own state
    (the oracle and random agents, which need no model).
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
        """Whether the session is open on a live connection of the running event loop and
        no request of it failed."""
        return self._broken is None and self._link is not None and self._link.alive

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._check()
        if self._link is not None and self._link.alive:  # reused from an earlier episode
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
        link = self._open_link()
        if link.max_action_bytes is not None:
            error = size_error("action", action, link.max_action_bytes)
            if error is not None:  # refused here: the request never reaches the wire
                raise EnvServerError(error, TOO_LARGE)
        obs, reward, terminated, truncated, info = await self._call(
            link.request("step", self._session, action=action)
        )
        return obs, reward, terminated, truncated, info

    async def aplay(self, policy: str, rng_seed: Any = None) -> tuple[str, StepResult]:
        """Step with the action the server's ``policy`` (one of :data:`SERVER_POLICIES`)
        picks from the env's own state; returns that action and the step's result, whose
        ``info[PLAYED_BY]`` names the policy. ``rng_seed`` seeds the random policy's rng."""
        link = self._open_link()
        answer = await self._call(
            link.request("step", self._session, play=policy, rng_seed=rng_seed)
        )
        obs, reward, terminated, truncated, info, action = answer
        return action, (obs, reward, terminated, truncated, info)

    def _open_link(self) -> _Link:
        self._check()
        if self._link is None:
            raise EnvServerError("step before reset")
        return self._link

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


class _LoopState:
    """What a client holds for one event loop: its connection and its pooled sessions.
    Neither outlives the loop: a connection's tasks and futures belong to it."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.connecting = asyncio.Lock()
        self.link: _Link | None = None
        self.free: dict[tuple, list[NetworkEnv]] = defaultdict(list)
        self.last_failure = (-float("inf"), "")


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
        self._state: _LoopState | None = None

    @property
    def late_answers(self) -> int:
        """Answers dropped because their request had already timed out (this connection)."""
        state = self._state
        return 0 if state is None or state.link is None else state.link.late_answers

    def _loop_state(self) -> _LoopState:
        """The state of the running event loop (a new loop starts afresh)."""
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            state = self._state = _LoopState(loop)
        return state

    async def link(self) -> _Link:
        """The live connection of the running event loop, opened (or reopened) on demand."""
        state = self._loop_state()
        async with state.connecting:
            if state.link is None or not state.link.alive:
                failed_at, failure = state.last_failure
                if time.monotonic() - failed_at < self.connect_timeout_s:
                    # Episodes waiting to connect fail together, not one timeout after another.
                    raise EnvServerError(failure)
                try:
                    state.link = await self._connect()
                except EnvServerError as exc:
                    state.last_failure = (time.monotonic(), str(exc))
                    raise
            return state.link

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
        except Exception as exc:  # the handshake was refused (bad token, wrong path, full)
            raise EnvServerError(f"env server at {self.url} refused the connection: {exc}") from exc
        limit = ws.response.headers.get(ACTION_LIMIT_HEADER)
        return _Link(ws, self.timeout_s, int(limit) if limit and limit.isdigit() else None)

    def acquire(self, task: Task) -> NetworkEnv:
        try:
            free = self._loop_state().free[task.env_key]
        except RuntimeError:  # no event loop runs: nothing pooled can be used
            free = []
        while free:
            handle = free.pop()
            if handle.usable:
                return handle
        return NetworkEnv(self, task.env_id, dict(task.env_kwargs))

    def release(self, task: Task, handle: NetworkEnv, *, healthy: bool) -> None:
        if healthy and handle.usable:
            self._loop_state().free[task.env_key].append(handle)
        else:
            handle.close()

    async def aclose(self) -> None:
        """Close the connection (the server closes its sessions); call from the run's loop."""
        state, self._state = self._state, None
        link = None if state is None else state.link
        if link is not None and link.loop is asyncio.get_running_loop():
            await link.close()

    def close(self) -> None:
        """Forget the connection; the server closes its sessions when the socket goes away.
        Prefer :meth:`aclose` from inside the event loop that ran the episodes."""
        self._state = None

    async def __aenter__(self) -> EnvServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
