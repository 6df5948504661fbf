"""Who may use the env server and what they may ask for: the bearer token and the env kwargs
clients may set."""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_TOKEN_CHARS = 16

OPEN_PATHS = frozenset({"/health"})
"""HTTP paths served without the token (load balancers probe them)."""

TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def check_token(token: str) -> None:
    """Refuse a token that is short or could not travel in a header unchanged."""
    if (
        len(token) < MIN_TOKEN_CHARS
        or not token.isascii()
        or not token.isprintable()
        or any(ch.isspace() for ch in token)
    ):
        raise ValueError(
            f"the bearer token must be at least {MIN_TOKEN_CHARS} printable ASCII characters "
            f"without spaces; {TOKEN_HINT}"
        )


class BearerAuth:
    """ASGI middleware: every HTTP route and WebSocket but :data:`OPEN_PATHS` (the API docs
    and schema included) needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str):
        check_token(token)
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket") and scope["path"] not in OPEN_PATHS:
            sent = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(sent, self._expected):
                await _refuse(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _refuse(scope: dict[str, Any], receive: Any, send: Any) -> None:
    from starlette.responses import JSONResponse
    from starlette.websockets import WebSocket

    response = JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
    if scope["type"] == "http":
        await response(scope, receive, send)
    elif "websocket.http.response" in scope.get("extensions", {}):
        await WebSocket(scope, receive, send).send_denial_response(response)
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": "bearer token"})


@dataclass(frozen=True)
class KwargsAllowList:
    """The env kwargs clients may set, per env id or glob; none unless listed.

    Registered ids (their presets and variants) need none; kwargs can reach files and
    costs the operator did not mean to serve (a dataset env's path, a task size).

    >>> allow = KwargsAllowList.parse(["rg:*=size,seed", "math:Arithmetic-v0=difficulty"])
    >>> allow.refused("rg:ab-v0", {"size": 10, "path": "/etc/passwd"})
    ['path']
    """

    entries: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def parse(cls, specs: Sequence[str]) -> KwargsAllowList:
        """From ``ID_OR_GLOB=NAME[,NAME...]`` strings (the ``--allow-kwargs`` option)."""
        entries = []
        for spec in specs:
            pattern, _, names = spec.partition("=")
            allowed = frozenset(name.strip() for name in names.split(",") if name.strip())
            if not pattern.strip() or not allowed:
                raise ValueError(
                    f"--allow-kwargs takes ID_OR_GLOB=NAME[,NAME...] (e.g. 'rg:*=size'), "
                    f"got {spec!r}"
                )
            entries.append((pattern.strip(), allowed))
        return cls(tuple(entries))

    def allowed(self, env_id: str) -> frozenset[str]:
        """The kwarg names clients may set for ``env_id``."""
        names: frozenset[str] = frozenset()
        for pattern, allowed in self.entries:
            if fnmatch.fnmatchcase(env_id, pattern):
                names |= allowed
        return names

    def refused(self, env_id: str, kwargs: dict[str, Any]) -> list[str]:
        """The names in ``kwargs`` that clients may not set for ``env_id``."""
        allowed = self.allowed(env_id)
        return sorted(name for name in kwargs if name not in allowed)
