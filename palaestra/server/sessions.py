"""The env sessions of a server: limits, the requests on them, idle reaping and counters.

A session is one env built by :func:`palaestra.make` for a client connection. Requests run
inline when the env steps inline (cheap pure-Python envs: no thread hop) and through the
env's async twins otherwise (sandboxes and other I/O run without blocking the server).
"""

from __future__ import annotations

import asyncio
import fnmatch
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import palaestra
from palaestra.core.env import Env
from palaestra.runner.network import METADATA, NO_SESSION


@dataclass(frozen=True)
class ServerLimits:
    """What one server allows: open sessions, the size of an action and of an observation
    (UTF-8 bytes), and the idle time after which a session is closed and its env freed."""

    max_sessions: int = 1024
    max_action_bytes: int = 256 * 1024
    max_observation_bytes: int = 1024 * 1024
    idle_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if min(self.max_sessions, self.max_action_bytes, self.max_observation_bytes) < 1:
            raise ValueError("session and size limits must be >= 1")
        if self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be > 0, got {self.idle_timeout_s}")


class RequestError(Exception):
    """A request the server refuses; its message (and ``code``, if any) go to the client."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class Session:
    """One env and when it was last used."""

    __slots__ = ("busy", "env", "inline", "last_used")

    def __init__(self, env: Env):
        self.env = env
        self.inline = env.steps_inline
        self.busy = 0
        self.last_used = time.monotonic()


OPS = ("create", "reset", "step", "close")

SessionKey = tuple[int, int]
"""(connection number, session number chosen by the client)."""


class SessionTable:
    """Every open session of the server, the allowed env ids, and the server's counters.

    ``env_patterns`` are ids or shell globs the clients may create (empty: every registered
    id).
    """

    def __init__(self, limits: ServerLimits, env_patterns: tuple[str, ...] = ()):
        self.limits = limits
        self.env_patterns = env_patterns
        self.sessions: dict[SessionKey, Session] = {}
        self.counters: Counter[str] = Counter()
        self.connections = 0
        self.started = time.monotonic()

    def allowed(self, env_id: str) -> bool:
        return not self.env_patterns or any(
            fnmatch.fnmatchcase(env_id, pattern) for pattern in self.env_patterns
        )

    def execute_inline(self, key: SessionKey, request: dict[str, Any]) -> Any | None:
        """Run a reset or step right away if its session's env steps inline; None otherwise
        (the caller then awaits :meth:`execute`)."""
        session = self.sessions.get(key)
        if session is None or not session.inline:
            return None
        op = request.get("op")
        if op == "step":
            self.counters["requests_step"] += 1
            session.last_used = time.monotonic()
            return self._checked_step(session.env.step(self._action(request)))
        if op == "reset":
            self.counters["requests_reset"] += 1
            session.last_used = time.monotonic()
            obs, info = session.env.reset(seed=request.get("seed"), options=request.get("options"))
            return self._checked_reset(session.env, obs, info)
        return None

    async def execute(self, key: SessionKey, request: dict[str, Any]) -> Any:
        """Run one request; raises :class:`RequestError` with a message for the client."""
        op = request.get("op")
        if op not in OPS:
            raise RequestError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
        self.counters[f"requests_{op}"] += 1
        if op == "create":
            return await self._create(key, request)
        session = self.sessions.get(key)
        if session is None:
            raise RequestError(
                f"no open session {key[1]} (closed, never created, or idle longer than "
                f"{self.limits.idle_timeout_s:g} s)",
                NO_SESSION,
            )
        session.busy += 1
        try:
            if op == "reset":
                obs, info = await session.env.areset(
                    seed=request.get("seed"), options=request.get("options")
                )
                return self._checked_reset(session.env, obs, info)
            if op == "step":
                return self._checked_step(await session.env.astep(self._action(request)))
            await self.close(key, "client")
            return None
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def _create(self, key: SessionKey, request: dict[str, Any]) -> None:
        env_id = str(request.get("env"))
        if key in self.sessions:
            raise RequestError(f"session {key[1]} already exists on this connection")
        if not self.allowed(env_id):
            raise RequestError(
                f"this server does not serve {env_id!r} (it serves {self.env_patterns})"
            )
        if len(self.sessions) >= self.limits.max_sessions:
            self.counters["sessions_refused"] += 1
            raise RequestError(
                f"the server is at its limit of {self.limits.max_sessions} open sessions"
            )
        kwargs = request.get("kwargs") or {}
        building = asyncio.ensure_future(asyncio.to_thread(palaestra.make, env_id, **kwargs))
        try:
            env = await asyncio.shield(building)
        except asyncio.CancelledError:  # the client left mid-create: free the env once built
            building.add_done_callback(_close_built_env)
            raise
        except Exception as exc:
            raise RequestError(f"cannot make {env_id!r}: {type(exc).__name__}: {exc}") from exc
        if key in self.sessions or len(self.sessions) >= self.limits.max_sessions:
            env.close()
            raise RequestError("session limit reached while the env was being built")
        self.sessions[key] = Session(env)
        self.counters["sessions_opened"] += 1

    async def close(self, key: SessionKey, reason: str) -> None:
        """Close a session and free its env (its sandbox, if any)."""
        session = self.sessions.pop(key, None)
        if session is None:
            return
        self.counters[f"sessions_closed_{reason}"] += 1
        if session.inline:
            session.env.close()
        else:
            await asyncio.to_thread(session.env.close)

    async def close_idle(self) -> int:
        """Close every session unused for longer than the idle timeout; returns how many."""
        deadline = time.monotonic() - self.limits.idle_timeout_s
        idle = [
            key
            for key, session in self.sessions.items()
            if not session.busy and session.last_used < deadline
        ]
        for key in idle:
            await self.close(key, "idle")
        return len(idle)

    def _action(self, request: dict[str, Any]) -> str:
        action = request.get("action")
        if not isinstance(action, str):
            raise RequestError(f"a step needs a string action, got {type(action).__name__}")
        _check_size("action", action, self.limits.max_action_bytes)
        return action

    def _checked_observation(self, obs: str) -> None:
        _check_size("the env's observation", obs, self.limits.max_observation_bytes)

    def _checked_reset(self, env: Env, obs: str, info: dict[str, Any]) -> list[Any]:
        self._checked_observation(obs)
        return [obs, info, {name: getattr(env, name) for name in METADATA}]

    def _checked_step(self, result: tuple) -> tuple:
        self._checked_observation(result[0])
        return result


def _check_size(what: str, text: str, limit: int) -> None:
    """Refuse ``text`` past ``limit`` UTF-8 bytes (encoded only when it might be)."""
    if len(text) * 4 > limit and len(text.encode()) > limit:
        raise RequestError(
            f"{what} of {len(text.encode())} bytes exceeds the server's limit of {limit}"
        )


def _close_built_env(building: asyncio.Future[Env]) -> None:
    if not building.cancelled() and building.exception() is None:
        building.result().close()
