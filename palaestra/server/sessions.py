"""The env sessions of a server: limits, the requests on them, idle reaping and counters.

A session is one env built by :func:`palaestra.make` for a client connection. Envs that
step inline (cheap pure-Python envs) run on the event loop, without a thread hop; the others
on their session's thread or in worker processes (:mod:`palaestra.server.stepping`).
Creates in flight count against the session limit. Clients set env kwargs only where the
server's allow-list says so, and an env that fails to build is reported without its error
text, which could tell what exists on the server.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import palaestra
from palaestra.agents.base import Conversation
from palaestra.agents.simple import OracleAgent, RandomAgent
from palaestra.core.env import Env, StepResult
from palaestra.core.registry import UnknownEnvError
from palaestra.runner.network import METADATA, NO_SESSION, PLAYED_BY
from palaestra.runner.process import ProcessEnvPool, RemoteEnv
from palaestra.runner.tasks import Task
from palaestra.server.access import KwargsAllowList
from palaestra.server.stepping import SessionThread, Stepping, ThreadBridge
from palaestra.server.wire import Request, RequestError, check_size

logger = logging.getLogger(__name__)

MAKE_FAILED = "make_failed"
NOT_SERVED = "not_served"
AT_LIMIT = "at_limit"

SERVER_AGENTS = {"oracle": OracleAgent(), "random": RandomAgent()}
"""The agents the server plays from the env's own state (``step`` with ``play``)."""


@dataclass(frozen=True)
class ServerLimits:
    """What one server allows.

    ``max_sessions`` open sessions (creates in flight included) and ``max_connections``
    WebSockets; the size of an action and of an observation (UTF-8 bytes); the idle time
    after which a session is closed and its env freed, and a connection without sessions
    closed. Per connection: ``max_queued_requests`` waiting behind another request of their
    session, and ``max_unread_bytes`` of answers the client has not read yet (past it, the
    connection is dropped).
    Server-wide: ``max_unread_bytes_total`` of answers unread by all clients together (past
    it, the connections holding the most are dropped), and ``handshake_timeout_s`` to
    connect and finish a WebSocket handshake (sockets still connecting count against
    ``max_connections``, with a few more for ``/health`` and ``/metrics``).
    """

    max_sessions: int = 1024
    max_action_bytes: int = 256 * 1024
    max_observation_bytes: int = 1024 * 1024
    idle_timeout_s: float = 300.0
    max_connections: int = 256
    max_queued_requests: int = 1024
    max_unread_bytes: int = 64 << 20
    max_unread_bytes_total: int = 1 << 30
    handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        counts = (
            self.max_sessions,
            self.max_action_bytes,
            self.max_observation_bytes,
            self.max_connections,
            self.max_queued_requests,
            self.max_unread_bytes,
            self.max_unread_bytes_total,
        )
        if min(counts) < 1:
            raise ValueError("session, connection, queue and size limits must be >= 1")
        if self.idle_timeout_s <= 0 or self.handshake_timeout_s <= 0:
            raise ValueError("idle_timeout_s and handshake_timeout_s must be > 0")


SessionKey = tuple[int, int]
"""(connection number, session number chosen by the client)."""


class Session:
    """One env of a client: where its calls run, and when it was last used."""

    inline = False

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.busy = 0
        self.last_used = time.monotonic()
        self.discreet = False
        """Whether the client chose env kwargs: its errors then reach it without detail."""

    def submit(self, request: Request) -> asyncio.Future[Any]:
        """Start a reset or step; the future gets its answer's payload."""
        raise NotImplementedError

    def run_now(self, request: Request) -> Any:
        """Run a reset or step right away (inline sessions only)."""
        raise NotImplementedError

    def close(self) -> asyncio.Future[Any] | None:
        """Free the env, without waiting: the future of the close, if it runs elsewhere."""
        raise NotImplementedError

    def finished(self, future: asyncio.Future[Any]) -> None:
        self.busy -= 1
        self.last_used = time.monotonic()

    def _reset_answer(self, described: Any, obs: str, info: dict[str, Any]) -> list[Any]:
        check_size("the env's observation", obs, self.limits.max_observation_bytes)
        return [obs, info, {name: getattr(described, name) for name in METADATA}]

    def _step_answer(self, result: StepResult) -> StepResult:
        check_size("the env's observation", result[0], self.limits.max_observation_bytes)
        return result


class LocalSession(Session):
    """An env in the server's process: stepped inline on the event loop, or on the
    session's own thread (``thread``)."""

    def __init__(self, env: Env, thread: SessionThread | None, limits: ServerLimits):
        super().__init__(limits)
        self.env = env
        self.thread = thread
        self.inline = thread is None
        self.native = env.native_async
        self.last_observation = ""
        self._conversation: Conversation | None = None

    def run_now(self, request: Request) -> Any:
        if request.op == "reset":
            return self.reset(request.seed, request.options)
        if request.play is None:
            return self.step(request.action)  # type: ignore[arg-type]
        return self.play(request.play, request.rng_seed)

    def submit(self, request: Request) -> asyncio.Future[Any]:
        assert self.thread is not None
        if not self.native:
            return self.thread.call(self.run_now, request)
        return self.thread.call_async(self._run_async, request)

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> list[Any]:
        return self._started(*self.env.reset(seed=seed, options=options))

    def step(self, action: str) -> StepResult:
        return self._stepped(self.env.step(action))

    def play(self, policy: str, rng_seed: Any) -> list[Any]:
        action = self._policy_action(policy, rng_seed)
        return self._played(policy, action, self.env.step(action))

    async def _run_async(self, request: Request) -> Any:
        env = self.env
        if request.op == "reset":
            return self._started(*await env.areset(seed=request.seed, options=request.options))
        if request.play is None:
            return self._stepped(await env.astep(request.action))  # type: ignore[arg-type]
        action = self._policy_action(request.play, request.rng_seed)
        return self._played(request.play, action, await env.astep(action))

    def _started(self, obs: str, info: dict[str, Any]) -> list[Any]:
        self.last_observation = obs
        self._conversation = None
        return self._reset_answer(self.env, obs, info)

    def _stepped(self, result: StepResult) -> StepResult:
        self.last_observation = result[0]
        return self._step_answer(result)

    def _played(self, policy: str, action: str, result: StepResult) -> list[Any]:
        obs, reward, terminated, truncated, info = self._stepped(result)
        return [obs, reward, terminated, truncated, {**info, PLAYED_BY: policy}, action]

    def _policy_action(self, policy: str, rng_seed: Any) -> str:
        """What ``policy``'s agent plays now, with the env in hand (its oracle keeps its
        state for the episode, its rng draws from ``rng_seed`` as the client's would)."""
        conversation = self._conversation
        if conversation is None:
            seed = tuple(rng_seed) if isinstance(rng_seed, list) else rng_seed
            conversation = Conversation([{"role": "user", "content": ""}], env=self.env, seed=seed)
            self._conversation = conversation
        conversation.messages[-1]["content"] = self.last_observation
        return SERVER_AGENTS[policy].act(conversation).text  # type: ignore[union-attr]

    def close(self) -> asyncio.Future[Any] | None:
        if self.thread is None:
            _close_logged(self.env)
            return None
        closing = self.thread.call(_close_logged, self.env)
        self.thread.stop()
        return closing


class ProcessSession(Session):
    """An env in a worker process of the server (``--step-executor processes``)."""

    def __init__(self, remote: RemoteEnv, limits: ServerLimits):
        super().__init__(limits)
        self.remote = remote
        self.failed = False

    def submit(self, request: Request) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self._run(request))

    async def _run(self, request: Request) -> Any:
        try:
            if request.op == "reset":
                obs, info = await self.remote.areset(seed=request.seed, options=request.options)
                return self._reset_answer(self.remote, obs, info)
            if request.play is not None:
                raise RequestError(
                    "this server steps envs in worker processes; the oracle and random "
                    "agents play on servers started with --step-executor threads"
                )
            return self._step_answer(await self.remote.astep(request.action))  # type: ignore[arg-type]
        except Exception:
            self.failed = True
            raise

    def close(self) -> asyncio.Future[Any] | None:
        self.remote.release(reuse=not self.failed)
        return None


class SessionTable:
    """Every open session of the server, what clients may create, and the counters.

    ``env_patterns`` are ids or shell globs the clients may create (empty: every registered
    id); ``allow_kwargs`` the env kwargs they may set; ``stepping`` where envs that do not
    step inline run.
    """

    def __init__(
        self,
        limits: ServerLimits | None = None,
        env_patterns: tuple[str, ...] = (),
        *,
        allow_kwargs: KwargsAllowList | None = None,
        stepping: Stepping | None = None,
    ):
        self.limits = limits or ServerLimits()
        self.env_patterns = env_patterns
        self.allow_kwargs = allow_kwargs or KwargsAllowList()
        self.stepping = stepping or Stepping()
        self.sessions: dict[SessionKey, Session] = {}
        self.creating: set[SessionKey] = set()
        self.counters: Counter[str] = Counter()
        self.started = time.monotonic()
        self._bridge: ThreadBridge | None = None
        self._pool: ProcessEnvPool | None = None
        self._kinds_inline: dict[str, bool] = {}

    def allowed(self, env_id: str) -> bool:
        return not self.env_patterns or any(
            fnmatch.fnmatchcase(env_id, pattern) for pattern in self.env_patterns
        )

    def run(self, key: SessionKey, request: Request) -> Any:
        """Run a reset or step: its payload now (inline envs) or a future of it."""
        self.counters[f"requests_{request.op}"] += 1
        session = self.sessions.get(key)
        if session is None:
            raise self._no_session(key)
        session.last_used = time.monotonic()
        if session.inline:
            return session.run_now(request)
        session.busy += 1
        future = session.submit(request)
        future.add_done_callback(session.finished)
        return future

    async def create(self, key: SessionKey, env_id: str, kwargs: dict[str, Any]) -> None:
        """Open session ``key`` on a new env; raises :class:`RequestError` for the client."""
        self.counters["requests_create"] += 1
        self._check_creatable(key, env_id, kwargs)
        self.creating.add(key)
        try:
            session = await self._open(key, env_id, kwargs)
        except (RequestError, asyncio.CancelledError):
            raise
        except Exception as exc:
            logger.warning("cannot make %r for a client: %r", env_id, exc)
            raise RequestError(
                f"cannot make {env_id!r}: the env failed to build on the server (its log "
                "has the error)",
                MAKE_FAILED,
            ) from None
        finally:
            self.creating.discard(key)
        session.discreet = bool(kwargs)
        self.sessions[key] = session
        self.counters["sessions_opened"] += 1

    def _check_creatable(self, key: SessionKey, env_id: str, kwargs: dict[str, Any]) -> None:
        if key in self.sessions or key in self.creating:
            raise RequestError(f"session {key[1]} already exists on this connection")
        if not self.allowed(env_id):
            raise RequestError(
                f"this server does not serve {env_id!r} (it serves {self.env_patterns})",
                NOT_SERVED,
            )
        try:
            palaestra.spec(env_id)
        except UnknownEnvError as exc:
            raise RequestError(f"cannot make {env_id!r}: {exc.args[0]}", NOT_SERVED) from None
        refused = self.allow_kwargs.refused(env_id, kwargs)
        if refused:
            raise RequestError(
                f"this server takes no {', '.join(map(repr, refused))} kwarg for {env_id!r}; "
                f"use a registered variant (`palaestra list`), or start the server with "
                f"--allow-kwargs '{env_id}={','.join(refused)}'",
                NOT_SERVED,
            )
        if len(self.sessions) + len(self.creating) >= self.limits.max_sessions:
            self.counters["sessions_refused"] += 1
            raise RequestError(
                f"the server is at its limit of {self.limits.max_sessions} open sessions",
                AT_LIMIT,
            )

    async def _open(self, key: SessionKey, env_id: str, kwargs: dict[str, Any]) -> Session:
        if self.stepping.executor == "threads":
            return await self._open_local(key, env_id, kwargs)
        kind = json.dumps([env_id, kwargs], sort_keys=True, default=str)
        if self._kinds_inline.get(kind, True):  # unknown yet, or inline: build it here
            session = await self._open_local(key, env_id, kwargs)
            self._kinds_inline[kind] = session.inline
            if session.inline:
                return session
            session.close()
        if self._pool is None:
            self._pool = ProcessEnvPool(self.stepping.processes)
        return ProcessSession(self._pool.acquire(Task(env_id, env_kwargs=kwargs)), self.limits)

    async def _open_local(
        self, key: SessionKey, env_id: str, kwargs: dict[str, Any]
    ) -> LocalSession:
        """Build the env on a new session thread; inline envs then leave the thread."""
        if self._bridge is None:
            self._bridge = ThreadBridge(asyncio.get_running_loop())
        thread = SessionThread(self._bridge, f"palaestra-session-{key[0]}.{key[1]}")
        built: list[Env] = []
        try:
            env = await thread.call(_build, built, env_id, kwargs)
        except BaseException:  # make failed, or the client left mid-create: free what got built
            thread.call(_close_built, built)
            thread.stop()
            raise
        if env.steps_inline:
            thread.stop()
            return LocalSession(env, None, self.limits)
        return LocalSession(env, thread, self.limits)

    def _no_session(self, key: SessionKey) -> RequestError:
        return RequestError(
            f"no open session {key[1]} (closed, never created, or idle longer than "
            f"{self.limits.idle_timeout_s:g} s)",
            NO_SESSION,
        )

    def close_for_client(self, key: SessionKey) -> None:
        """A client's ``close``: raises :class:`RequestError` if the session is not open."""
        self.counters["requests_close"] += 1
        if not self.close(key, "client"):
            raise self._no_session(key)

    def close(self, key: SessionKey, reason: str) -> bool:
        """Close a session and free its env (its sandbox, if any); False if none was open."""
        session = self.sessions.pop(key, None)
        if session is None:
            return False
        self.counters[f"sessions_closed_{reason}"] += 1
        _close_session(session)
        return True

    def close_idle(self) -> int:
        """Close every session unused for longer than the idle timeout; returns how many."""
        deadline = time.monotonic() - self.limits.idle_timeout_s
        idle = [
            key
            for key, session in self.sessions.items()
            if not session.busy and session.last_used < deadline
        ]
        for key in idle:
            self.close(key, "idle")
        return len(idle)

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """Close every session (waiting up to ``timeout_s`` for their envs to close) and
        stop the worker processes."""
        closing = []
        for key, session in list(self.sessions.items()):
            del self.sessions[key]
            self.counters["sessions_closed_shutdown"] += 1
            future = _close_session(session)
            if future is not None:
                closing.append(future)
        if closing:
            await asyncio.wait(closing, timeout=timeout_s)
        if self._pool is not None:
            await asyncio.to_thread(self._pool.close)


def _close_session(session: Session) -> asyncio.Future[Any] | None:
    """Close ``session``, logging a failure instead of raising it: one session that cannot
    be closed never stops the others' clean-up (a disconnect, the reaper, shutdown)."""
    try:
        return session.close()
    except Exception as exc:
        logger.warning("closing a session failed: %r", exc)
        return None


def _build(built: list[Env], env_id: str, kwargs: dict[str, Any]) -> Env:
    built.append(palaestra.make(env_id, **kwargs))
    return built[0]


def _close_built(built: list[Env]) -> None:
    if built:
        _close_logged(built[0])


def _close_logged(env: Env) -> None:
    try:
        env.close()
    except Exception as exc:
        logger.warning("closing %r failed: %r", env, exc)
