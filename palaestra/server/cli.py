"""The ``palaestra serve`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from palaestra.console import fail
from palaestra.core.extras import extras_problem
from palaestra.runner.network import TOKEN_ENV_VAR
from palaestra.server import memory
from palaestra.server.run import build_server
from palaestra.server.sessions import ServerLimits
from palaestra.server.stepping import Stepping


def serve_command(
    envs: Annotated[
        list[str] | None,
        typer.Argument(help="Env ids or globs clients may create (default: every id)."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs a token.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            help=f"Bearer token clients must send, 16+ characters (default: ${TOKEN_ENV_VAR})."
        ),
    ] = None,
    allow_kwargs: Annotated[
        list[str] | None,
        typer.Option(
            help="Env kwargs clients may set: ID_OR_GLOB=NAME[,NAME...], repeatable "
            "(default: none; registered variants need none)."
        ),
    ] = None,
    max_sessions: Annotated[int, typer.Option(help="Open sessions at most.")] = 1024,
    max_connections: Annotated[int, typer.Option(help="Client connections at most.")] = 256,
    idle_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds after which an unused session, or a connection without "
            "sessions, is closed."
        ),
    ] = 300.0,
    max_action_bytes: Annotated[int, typer.Option(help="Largest action accepted.")] = 256 * 1024,
    max_observation_bytes: Annotated[
        int, typer.Option(help="Largest observation sent back (larger ones fail that step).")
    ] = 1024 * 1024,
    max_queued_requests: Annotated[
        int, typer.Option(help="Requests waiting behind their session's, per connection.")
    ] = 1024,
    max_unread_bytes: Annotated[
        int, typer.Option(help="Answer bytes a client may leave unread before it is dropped.")
    ] = 64 << 20,
    max_unread_bytes_total: Annotated[
        int,
        typer.Option(
            help="Answer bytes all clients together may leave unread; past it, those "
            "holding the most are dropped."
        ),
    ] = 1 << 30,
    handshake_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to connect and finish its handshake.")
    ] = 10.0,
    step_executor: Annotated[
        str,
        typer.Option(
            help="Where envs that do not step inline run: 'threads' (one per session) or "
            "'processes' (for CPU-bound envs)."
        ),
    ] = "threads",
    step_processes: Annotated[
        int | None,
        typer.Option(help="Worker processes of --step-executor processes (default: CPUs)."),
    ] = None,
) -> None:
    """Serve environments over the network (WebSocket sessions, /health, /metrics)."""
    console = Console()
    problem = extras_problem(env_ids=envs or (), serve=True)  # before a slow start, one line
    if problem is not None:
        fail(console, problem)
    token = token or os.environ.get(TOKEN_ENV_VAR) or None
    try:
        limits = ServerLimits(
            max_sessions=max_sessions,
            max_action_bytes=max_action_bytes,
            max_observation_bytes=max_observation_bytes,
            idle_timeout_s=idle_timeout,
            max_connections=max_connections,
            max_queued_requests=max_queued_requests,
            max_unread_bytes=max_unread_bytes,
            max_unread_bytes_total=max_unread_bytes_total,
            handshake_timeout_s=handshake_timeout,
        )
        server = build_server(
            envs or (),
            host=host,
            port=port,
            token=token,
            limits=limits,
            allow_kwargs=allow_kwargs or (),
            stepping=Stepping(step_executor, step_processes),  # type: ignore[arg-type]
        )
    except (ValueError, ImportError) as exc:
        fail(console, exc)
    served = ", ".join(envs) if envs else "every registered env"
    console.print(f"serving {served} on ws://{host}:{port}/sessions")
    memory.cap_malloc_arenas()  # this process is the server's: before its session threads
    server.run()


def register_cli(app: typer.Typer) -> None:
    """Add ``serve`` to the ``palaestra`` command."""
    app.command("serve")(serve_command)
