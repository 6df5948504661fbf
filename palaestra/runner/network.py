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
Episodes that start while the server cannot be reached wait for it, retrying with backoff
until their deadline, so a restart costs the episodes in flight only.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from palaestra.core.env import ResetResult, StepResult
from palaestra.runner.tasks import Task

if TYPE_CHECKING:
    from palaestra.runner.link import Link

TOKEN_ENV_VAR = "PALAESTRA_ENV_SERVER_TOKEN"
"""Where clients and ``palaestra serve`` read the bearer token when none is passed."""

METADATA = ("system_prompt", "tools", "tool_format", "max_turns")
"""Env attributes a reset response carries (the runner's view of the env)."""

FRAME_BYTES = 1 << 20
"""A client starts a new frame past this many bytes of queued requests."""


NO_SESSION = "no_session"
"""Error code of an answer about a session the server does not have (closed while idle)."""

LOST = "lost"
"""Error code of a request failed because its connection ended before the answer came: a
session being opened is opened again on a new connection (nothing of it was seen yet)."""

REFUSED = "refused"
"""Error code of a handshake the server refused for good (401 or 403: a missing or wrong
token); a client does not retry it."""

TOO_LARGE = "too_large"
"""Error code of a request refused for its size (an action past the server's limit)."""

ACTION_LIMIT_HEADER = "x-palaestra-max-action-bytes"
"""Response header of the WebSocket handshake: the server's limit on one action, so that
clients refuse a larger action themselves (the request never reaches the wire)."""

SERVER_POLICIES = ("oracle", "random")
"""Policies the server can play from the env's own state (``step`` with ``play``)."""

PLAYED_BY = "played_by"
"""``info`` key of a step the server played: the policy's name."""

RECONNECT_BACKOFF_S = (0.1, 2.0)
"""A client that cannot reach its server tries again after the first delay, doubled after
each failure up to the second (each with jitter), until its callers' deadlines pass."""


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


def ignore_failure(future: asyncio.Future[Any]) -> None:
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
        self._link: Link | None = None
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
                if exc.code not in (NO_SESSION, LOST):
                    self._broken = f"session unusable after an earlier failure: {exc}"
                    raise
                # Closed while it sat idle in the client's pool, or its connection ended.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._client.timeout_s
        while True:
            try:
                return self._started(await self._open_session(deadline, seed, options))
            except EnvServerError as exc:
                # A connection lost before the episode's first observation costs it nothing:
                # open the session again on a new connection, until the deadline.
                if exc.code != LOST or loop.time() >= deadline:
                    self._broken = f"session unusable after an earlier failure: {exc}"
                    raise

    async def _open_session(
        self, deadline: float, seed: int | None, options: dict[str, Any] | None
    ) -> list[Any]:
        """Create a session on the live connection and reset it; the reset's answer."""
        self._link = await self._client.link(deadline)
        self._session = next(self._link.sessions)
        created = self._link.request(
            "create", self._session, env=self._env_id, kwargs=self._env_kwargs
        )
        reset = self._link.request("reset", self._session, seed=seed, options=options)
        reset.add_done_callback(ignore_failure)  # fails too when the create fails
        await created
        return await reset

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

    def _open_link(self) -> Link:
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
        self.link: Link | None = None
        self.free: dict[tuple, list[NetworkEnv]] = defaultdict(list)
        self.reconnecting: asyncio.Task[Link] | None = None
        self.wanted_until = 0.0
        """Until when (loop time) the reconnecting task keeps trying: the latest deadline
        of the episodes waiting for it."""
        self.last_failure = ""


class EnvServerClient:
    """An env host whose envs live on a ``palaestra serve`` server.

    ``token`` defaults to ``$PALAESTRA_ENV_SERVER_TOKEN``; ``timeout_s`` bounds every request
    (a slow or silent server fails that episode instead of hanging the run) and how long an
    episode waits for an unreachable server to come back (connecting is retried with backoff,
    each attempt bounded by ``connect_timeout_s``). Sessions of clean episodes are reused by
    later tasks of the same env id and kwargs.

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

    async def link(self, deadline: float | None = None) -> Link:
        """The live connection of the running event loop, opened (or reopened) on demand.

        While the server cannot be reached, connecting is retried with backoff (one attempt
        at a time, shared by every caller) until the caller's ``deadline`` (loop time;
        default ``timeout_s`` from now): episodes that start while a server restarts wait
        for it instead of failing.
        """
        state = self._loop_state()
        loop = state.loop
        if deadline is None:
            deadline = loop.time() + self.timeout_s
        while True:
            if state.link is not None and state.link.alive:
                return state.link
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise EnvServerError(
                    f"no connection to the env server within {self.timeout_s:g} s: "
                    f"{state.last_failure}"
                )
            state.wanted_until = max(state.wanted_until, deadline)
            if state.reconnecting is None or state.reconnecting.done():
                state.reconnecting = loop.create_task(self._reconnect(state))
                state.reconnecting.add_done_callback(ignore_failure)
            try:
                async with asyncio.timeout(remaining):
                    await asyncio.shield(state.reconnecting)
            except EnvServerError as exc:
                if exc.code == REFUSED:  # a wrong token does not get better by waiting
                    raise
            except TimeoutError:
                pass

    async def _reconnect(self, state: _LoopState) -> Link:
        """Connect, retrying with backoff while some caller still waits; the link is kept
        in ``state``."""
        loop = state.loop
        backoff = RECONNECT_BACKOFF_S[0]
        while True:
            left = state.wanted_until - loop.time()
            try:
                state.link = await self._connect(min(self.connect_timeout_s, max(left, 0.01)))
                return state.link
            except EnvServerError as exc:
                state.last_failure = str(exc)
                if exc.code == REFUSED:
                    raise
            left = state.wanted_until - loop.time()
            if left <= 0:
                raise EnvServerError(state.last_failure)
            await asyncio.sleep(min(backoff * random.uniform(0.5, 1.0), left))
            backoff = min(backoff * 2, RECONNECT_BACKOFF_S[1])

    async def _connect(self, connect_timeout_s: float) -> Link:
        from palaestra.runner.link import open_link

        return await open_link(self.url, self.token, self.timeout_s, connect_timeout_s)

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
            link.abort()

    def close(self) -> None:
        """Forget the connection; the server closes its sessions when the socket goes away.
        Prefer :meth:`aclose` from inside the event loop that ran the episodes."""
        self._state = None

    async def __aenter__(self) -> EnvServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
