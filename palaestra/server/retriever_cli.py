"""``palaestra serve-retriever``: serve a corpus (or the synthetic knowledge base) over HTTP."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from palaestra.server.retriever import DEFAULT_TOPK, TOKEN_ENV, RetrieverLimits, check_binding

_LIMITS = RetrieverLimits()


def serve_retriever_command(
    corpus: Annotated[
        Path | None,
        typer.Option(
            help="JSONL corpus, one document per line ({id, contents} or {id, title, text})."
        ),
    ] = None,
    world_seed: Annotated[
        int, typer.Option(help="Without --corpus: the synthetic knowledge base of this seed.")
    ] = 0,
    host: Annotated[
        str, typer.Option(help="Address to bind; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    token: Annotated[
        str | None, typer.Option(help=f"Bearer token clients must send (default ${TOKEN_ENV}).")
    ] = None,
    topk: Annotated[
        int, typer.Option(min=1, help="Documents per query when a request's topk is null or 0.")
    ] = DEFAULT_TOPK,
    max_queries: Annotated[
        int, typer.Option(min=1, help="Queries one request may send.")
    ] = _LIMITS.max_queries,
    max_documents: Annotated[
        int, typer.Option(min=1, help="Documents one request may ask for (queries x topk).")
    ] = _LIMITS.max_documents,
    max_body_mb: Annotated[
        float, typer.Option(min=0.001, help="Largest request body, in MiB.")
    ] = _LIMITS.max_body_bytes / 2**20,
    request_timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds a connection has to send a whole request."),
    ] = _LIMITS.request_timeout_s,
) -> None:
    """Serve BM25 retrieval over HTTP with Search-R1's API (POST /retrieve)."""
    from palaestra.envs.search.files import load_corpus
    from palaestra.envs.search.world import build_world
    from palaestra.server.retriever import serve_retriever
    from palaestra.tools.search import BM25Retriever

    token = token or os.environ.get(TOKEN_ENV) or None
    try:
        check_binding(host, token)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    limits = RetrieverLimits(max_queries, max_documents, int(max_body_mb * 2**20), request_timeout)
    docs = load_corpus(corpus) if corpus else build_world(world_seed).docs
    typer.echo(f"serving {len(docs)} documents on http://{host}:{port}/retrieve")
    serve_retriever(
        BM25Retriever(docs), host=host, port=port, token=token, topk=topk, limits=limits
    )


def register_cli(app: typer.Typer) -> None:
    """Add ``serve-retriever`` to the ``palaestra`` command."""
    app.command("serve-retriever")(serve_retriever_command)
