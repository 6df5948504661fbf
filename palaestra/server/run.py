"""Building the env server: the bind-address rule and the uvicorn settings."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from palaestra.server.sessions import ServerLimits, SessionTable

MAX_FRAME_BYTES = 64 << 20
"""Frames past this size close the connection. Clients cut frames at about 1 MiB, so only
an action far past any limit gets here; the action limit itself answers per request."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_server(
    env_patterns: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    limits: ServerLimits | None = None,
    log_level: str = "warning",
):
    """A ``uvicorn.Server`` for the env ids (or globs) ``env_patterns`` (empty: every id).

    Binding any address but loopback needs a bearer ``token``: an env server runs whatever
    envs (and sandboxes) its clients ask for.

    >>> build_server(["game:*"]).run()  # doctest: +SKIP
    """
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to bind {host!r} without a bearer token: pass --token (or set "
            "PALAESTRA_ENV_SERVER_TOKEN), or bind 127.0.0.1"
        )
    import uvicorn

    from palaestra.server.app import create_app

    limits = limits or ServerLimits()
    table = SessionTable(limits, tuple(env_patterns))
    config = uvicorn.Config(
        create_app(table, token=token),
        host=host,
        port=port,
        log_level=log_level,
        ws="websockets-sansio",
        ws_max_size=max(MAX_FRAME_BYTES, 4 * limits.max_action_bytes),
        ws_per_message_deflate=False,
        lifespan="on",
    )
    return uvicorn.Server(config)
