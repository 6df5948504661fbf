"""The retrieval server: any palaestra retriever behind Search-R1's HTTP API.

``POST /retrieve {"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"id": ..., "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}``
(without scores, each row is the list of documents), so Search-R1's and GEM's training code
can use it and palaestra's envs can use theirs. It listens on localhost by default; bound
to any other address it requires a bearer token.

>>> app = create_app(BM25Retriever(docs))  # doctest: +SKIP
>>> serve_retriever(BM25Retriever(docs), port=8000)  # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

import pydantic

from palaestra.tools.search.base import Retriever

MAX_TOPK = 100
MAX_QUERIES = 512
TOKEN_ENV = "PALAESTRA_RETRIEVER_TOKEN"


def _fastapi() -> Any:
    try:
        import fastapi
    except ImportError as exc:
        raise ImportError(
            "the retrieval server needs fastapi and uvicorn; install them with "
            "`pip install 'palaestra[search]'`"
        ) from exc
    return fastapi


class RetrieveRequest(pydantic.BaseModel):
    """Search-R1's request body."""

    queries: list[str] = pydantic.Field(max_length=MAX_QUERIES)
    topk: int = pydantic.Field(3, ge=1, le=MAX_TOPK)
    return_scores: bool = False


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"binding the retrieval server to {host!r} exposes it beyond this machine; set a "
            f"bearer token (--token or ${TOKEN_ENV})"
        )


def create_app(retriever: Retriever, *, token: str | None = None) -> Any:
    """A FastAPI app serving ``retriever``; with ``token``, requests need
    ``Authorization: Bearer <token>``."""
    fastapi = _fastapi()

    def authorize(authorization: str | None = fastapi.Header(None)) -> None:
        if token is None:
            return
        expected = f"Bearer {token}".encode()
        if authorization is None or not hmac.compare_digest(authorization.encode(), expected):
            raise fastapi.HTTPException(status_code=401, detail="missing or wrong bearer token")

    app = fastapi.FastAPI(title="palaestra retrieval server")

    @app.post("/retrieve", dependencies=[fastapi.Depends(authorize)])
    def retrieve(request: RetrieveRequest) -> dict[str, Any]:
        rows = retriever.search_many(request.queries, request.topk)
        result = [
            [
                {"document": {"id": d.id, "contents": d.contents}, "score": d.score}
                if request.return_scores
                else {"id": d.id, "contents": d.contents}
                for d in docs
            ]
            for docs in rows
        ]
        return {"result": result}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def serve_retriever(
    retriever: Retriever,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``retriever`` until interrupted; a non-loopback ``host`` requires ``token``."""
    check_binding(host, token)
    import uvicorn

    uvicorn.run(create_app(retriever, token=token), host=host, port=port, log_level=log_level)
