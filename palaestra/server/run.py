"""Building the env server: the bind-address and token rules, and the uvicorn settings."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from palaestra.runner.network import FRAME_BYTES
from palaestra.server.access import KwargsAllowList, check_token
from palaestra.server.sessions import ServerLimits, SessionTable
from palaestra.server.stepping import Stepping

MAX_FRAME_BYTES = 16 << 20
"""Frames past this size (or past what the action limit needs) close the connection.
Clients cut frames at about 1 MiB and refuse an action past the server's limit themselves
(the handshake announces it), so only a client that ignores both gets here."""


HTTP_ROOM = 16
"""Sockets a server takes past its connection limit, so ``/health`` and ``/metrics`` still
answer (and the WebSocket route refuses the extra handshakes with its 503)."""


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
    allow_kwargs: Sequence[str] = (),
    stepping: Stepping | None = None,
    log_level: str = "warning",
):
    """A ``uvicorn.Server`` for the env ids (or globs) ``env_patterns`` (empty: every id).

    Binding any address but loopback needs a bearer ``token`` (16 characters at least): an
    env server runs whatever envs (and sandboxes) its clients ask for. ``allow_kwargs`` are
    the env kwargs clients may set (``ID_OR_GLOB=NAME[,NAME...]``; none by default).

    >>> build_server(["game:*"]).run()  # doctest: +SKIP
    """
    if token is not None:
        check_token(token)
    elif not is_loopback(host):
        raise ValueError(
            f"refusing to bind {host!r} without a bearer token: pass --token (or set "
            "PALAESTRA_ENV_SERVER_TOKEN), or bind 127.0.0.1"
        )
    import uvicorn

    from palaestra.server.app import create_app
    from palaestra.server.http_guards import deadline_protocol
    from palaestra.server.websocket import SessionsProtocol

    limits = limits or ServerLimits()
    table = SessionTable(
        limits,
        tuple(env_patterns),
        allow_kwargs=KwargsAllowList.parse(allow_kwargs),
        stepping=stepping,
    )
    config = uvicorn.Config(
        create_app(table, token=token),
        host=host,
        port=port,
        log_level=log_level,
        ws=SessionsProtocol,
        http=deadline_protocol(
            limits.handshake_timeout_s,
            max_sockets=limits.max_connections + HTTP_ROOM,
            on_refused=partial(table.counters.update, ["connections_refused"]),
        ),
        # JSON escapes can make an action's text up to 6 times its UTF-8 size.
        ws_max_size=max(MAX_FRAME_BYTES, 6 * limits.max_action_bytes + FRAME_BYTES),
        ws_per_message_deflate=False,
        lifespan="on",
    )
    return uvicorn.Server(config)


@contextmanager
def serving(env_patterns: Sequence[str] = (), **options: Any) -> Iterator[str]:
    """Serve in a thread of this process (on a free port unless ``port`` is given); yields
    the server's URL and stops the server on exit. ``options`` go to :func:`build_server`.

    >>> with serving(["game:*"]) as url:  # doctest: +SKIP
    ...     episodes = Runner(OracleAgent(), host=EnvServerClient(url)).run(tasks)
    """
    server = build_server(env_patterns, **{"port": 0, **options})
    thread = threading.Thread(target=server.run, name="palaestra-serve", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the env server did not start (its log says why)")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
