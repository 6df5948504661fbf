"""The ``palaestra serve`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from palaestra.console import fail
from palaestra.runner.network import TOKEN_ENV_VAR
from palaestra.server.run import build_server
from palaestra.server.sessions import ServerLimits


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
        typer.Option(help=f"Bearer token clients must send (default: ${TOKEN_ENV_VAR})."),
    ] = None,
    max_sessions: Annotated[int, typer.Option(help="Open sessions at most.")] = 1024,
    idle_timeout: Annotated[
        float, typer.Option(help="Seconds after which an unused session is closed.")
    ] = 300.0,
    max_action_bytes: Annotated[int, typer.Option(help="Largest action accepted.")] = 256 * 1024,
    max_observation_bytes: Annotated[
        int, typer.Option(help="Largest observation sent back (larger ones fail that step).")
    ] = 1024 * 1024,
) -> None:
    """Serve environments over the network (WebSocket sessions, /health, /metrics)."""
    console = Console()
    token = token or os.environ.get(TOKEN_ENV_VAR) or None
    try:
        limits = ServerLimits(max_sessions, max_action_bytes, max_observation_bytes, idle_timeout)
        server = build_server(envs or (), host=host, port=port, token=token, limits=limits)
    except (ValueError, ImportError) as exc:
        fail(console, exc)
    served = ", ".join(envs) if envs else "every registered env"
    console.print(f"serving {served} on ws://{host}:{port}/sessions")
    server.run()


def register_cli(app: typer.Typer) -> None:
    """Add ``serve`` to the ``palaestra`` command."""
    app.command("serve")(serve_command)
