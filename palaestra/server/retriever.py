"""The retrieval server: any palaestra retriever behind Search-R1's HTTP API.

``POST /retrieve {"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"id": ..., "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}``
(without scores, each row is the list of documents), so Search-R1's and GEM's training code
can use it and palaestra's envs can use theirs. As in Search-R1's server, the request is
validated by pydantic in lax mode (``"topk": "3"`` is 3), ``topk`` null or 0 means the
server's default (``topk=``), and every query gets ``topk`` documents when the corpus has
them.

What one request may ask is bounded (:class:`RetrieverLimits`): queries per request (4096
by default: Search-R1 sends every search of a training step in one request, up to 2560 in
its GRPO script), documents per request (queries x topk), body size, and the time to
receive it (slow clients are cut off). Errors are short and never repeat the request.
It listens on localhost by default; bound to any other address it requires a bearer token.

>>> app = create_app(BM25Retriever(docs))  # doctest: +SKIP
>>> serve_retriever(BM25Retriever(docs), port=8000)  # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass
from typing import Any

import pydantic

from palaestra.server.http_guards import BodyTooLarge, deadline_protocol, read_body
from palaestra.tools.search.base import Doc, Retriever

TOKEN_ENV = "PALAESTRA_RETRIEVER_TOKEN"
DEFAULT_TOPK = 3
INLINE_QUERIES = 8
"""Requests with at most this many queries are searched on the event loop (about a
millisecond each); larger ones in a worker thread, so they never stall the loop."""


@dataclass(frozen=True)
class RetrieverLimits:
    """What one request may ask of the retrieval server.

    ``max_queries`` queries, ``max_documents`` documents in all (queries x topk), a body
    of ``max_body_bytes``, received whole within ``request_timeout_s`` seconds of the
    connection opening or of its previous answer.
    """

    max_queries: int = 4096
    max_documents: int = 65_536
    max_body_bytes: int = 16 << 20
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if min(self.max_queries, self.max_documents, self.max_body_bytes) < 1:
            raise ValueError("max_queries, max_documents and max_body_bytes must be >= 1")
        if self.request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")


class RequestError(ValueError):
    """A request the server refuses; the message names the field, never its value."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RetrieveRequest:
    """A checked Search-R1 request."""

    queries: list[str]
    topk: int
    return_scores: bool


class _SearchR1Query(pydantic.BaseModel):
    """Search-R1's ``QueryRequest``, validated as its server validates it (pydantic's lax
    mode: ``"3"`` and ``3.0`` are a ``topk`` of 3, ``"yes"`` is true)."""

    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


_FIELD_ERRORS = {
    "queries": "'queries' must be a list of strings",
    "topk": "'topk' must be a positive integer, or null or 0 for the default",
    "return_scores": "'return_scores' must be true or false",
}


def parse_request(body: bytes, limits: RetrieverLimits, default_topk: int) -> RetrieveRequest:
    """The request in ``body`` (Search-R1's JSON), or a :class:`RequestError` that says
    which field is wrong."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting past the parser's depth
        raise RequestError("the body is not JSON") from None
    if not isinstance(payload, dict):
        raise RequestError('the body must be a JSON object {"queries": [...], "topk": k}')
    try:
        query = _SearchR1Query.model_validate(payload)
    except pydantic.ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0])
        raise RequestError(_FIELD_ERRORS.get(field, f"{field!r} is not valid")) from None
    queries, topk = query.queries, query.topk or default_topk
    if len(queries) > limits.max_queries:
        raise RequestError(
            f"{len(queries)} queries in one request; this server takes at most "
            f"{limits.max_queries} (--max-queries)"
        )
    if topk < 0:
        raise RequestError(_FIELD_ERRORS["topk"])
    if len(queries) * topk > limits.max_documents:
        raise RequestError(
            f"{len(queries)} queries x topk {topk} asks for more than this server's "
            f"{limits.max_documents} documents per request (--max-documents)"
        )
    return RetrieveRequest(queries, topk, query.return_scores)


def _row(docs: list[Doc], with_scores: bool) -> list[dict[str, Any]]:
    if with_scores:
        return [{"document": {"id": d.id, "contents": d.contents}, "score": d.score} for d in docs]
    return [{"id": d.id, "contents": d.contents} for d in docs]


def result_body(rows: list[list[Doc]], with_scores: bool) -> bytes:
    """Search-R1's ``{"result": [...]}`` answer, encoded."""
    result = [_row(docs, with_scores) for docs in rows]
    return json.dumps({"result": result}, ensure_ascii=False).encode()


def _fastapi() -> Any:
    try:
        import fastapi
    except ImportError as exc:
        raise ImportError(
            "the retrieval server needs fastapi and uvicorn; install them with "
            "`pip install 'palaestra[search]'`"
        ) from exc
    return fastapi


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


def _authorized(authorization: str | None, token: str | None) -> bool:
    if token is None:
        return True
    expected = f"Bearer {token}".encode()
    return authorization is not None and hmac.compare_digest(authorization.encode(), expected)


def create_app(
    retriever: Retriever,
    *,
    token: str | None = None,
    topk: int = DEFAULT_TOPK,
    limits: RetrieverLimits | None = None,
) -> Any:
    """A FastAPI app serving ``retriever``; ``topk`` answers requests whose topk is null or
    0; with ``token``, requests need ``Authorization: Bearer <token>``."""
    fastapi = _fastapi()
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import JSONResponse, Response

    limits = limits or RetrieverLimits()
    app = fastapi.FastAPI(title="palaestra retrieval server")

    def refuse(status: int, message: str) -> Any:
        return JSONResponse({"detail": message}, status_code=status)

    async def retrieve(request: Any) -> Any:
        if not _authorized(request.headers.get("authorization"), token):
            return refuse(401, "missing or wrong bearer token")
        try:
            body = await read_body(request, limits.max_body_bytes)
            parsed = parse_request(body, limits, topk)
        except BodyTooLarge as error:
            return refuse(413, f"{error} (--max-body-mb)")
        except RequestError as error:
            return refuse(error.status, str(error))
        if len(parsed.queries) <= INLINE_QUERIES:
            rows = retriever.search_many(parsed.queries, parsed.topk)
        else:
            rows = await run_in_threadpool(retriever.search_many, parsed.queries, parsed.topk)
        return Response(result_body(rows, parsed.return_scores), media_type="application/json")

    app.add_route("/retrieve", retrieve, methods=["POST"])

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def build_retriever_server(
    retriever: Retriever,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    topk: int = DEFAULT_TOPK,
    limits: RetrieverLimits | None = None,
    log_level: str = "warning",
) -> Any:
    """A ``uvicorn.Server`` for ``retriever`` (call ``.run()``); a non-loopback ``host``
    requires ``token``."""
    check_binding(host, token)
    import uvicorn

    limits = limits or RetrieverLimits()
    config = uvicorn.Config(
        create_app(retriever, token=token, topk=topk, limits=limits),
        host=host,
        port=port,
        log_level=log_level,
        http=deadline_protocol(limits.request_timeout_s),
    )
    return uvicorn.Server(config)


def serve_retriever(retriever: Retriever, **options: Any) -> None:
    """Serve ``retriever`` until interrupted (options of :func:`build_retriever_server`)."""
    build_retriever_server(retriever, **options).run()
