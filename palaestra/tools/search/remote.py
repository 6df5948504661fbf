"""A client of a Search-R1-style retrieval server (palaestra's own, Search-R1's or GEM's).

Request and response shapes are Search-R1's::

    POST /retrieve {"queries": ["..."], "topk": 3, "return_scores": true}
    -> {"result": [[{"document": {"id": "0", "contents": "\\"Title\\"\\ntext"}, "score": 1.2}]]}

Each request has a timeout; timeouts, connection errors, 429 and 5xx answers are retried
with exponential backoff; what still fails raises :class:`RetrieverError`, which the search
tool turns into an observation (the episode goes on).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from typing import Any

import httpx

from palaestra.tools.search.base import Doc, Retriever, check_k, clean_query

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class RetrieverError(RuntimeError):
    """The retrieval server could not answer (after retries) or answered nonsense."""


def retrieve_url(url: str) -> str:
    """``url`` ending in ``/retrieve`` (a bare ``http://host:port`` gets the path added)."""
    url = url.rstrip("/")
    return url if url.endswith("/retrieve") else f"{url}/retrieve"


def parse_results(payload: Any, expected: int) -> list[list[Doc]]:
    """Docs from a ``{"result": [...]}`` answer (with or without scores)."""
    rows = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(rows, list) or len(rows) != expected:
        raise RetrieverError(f"the server's answer has no 'result' list of {expected} rows")
    try:
        return [[_doc(item) for item in row] for row in rows]
    except (TypeError, KeyError, AttributeError) as exc:
        raise RetrieverError(f"the server's answer has a malformed document ({exc})") from None


def _doc(item: dict[str, Any]) -> Doc:
    if "document" in item:  # with scores
        document, score = item["document"], float(item.get("score", 0.0))
    else:
        document, score = item, 0.0
    contents = document.get("contents")
    if contents is None:  # some servers send title and text apart
        contents = f'"{document.get("title", "")}"\n{document.get("text", "")}'
    return Doc.from_contents(str(document.get("id", "")), str(contents), score)


class RemoteRetriever(Retriever):
    """Search through an HTTP retrieval server at ``url``.

    ``token`` is sent as a bearer token; ``timeout`` (seconds) bounds each attempt;
    ``retries`` more attempts follow a failure, ``backoff * 2**n`` seconds apart.

    >>> retriever = RemoteRetriever("http://127.0.0.1:8000/retrieve")  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
    ):
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, retries and backoff >= 0")
        self.url = retrieve_url(url)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._client: httpx.Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]
        self._async_clients = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"RemoteRetriever({self.url!r})"

    def _payload(self, queries: Sequence[str], k: int) -> dict[str, Any]:
        return {
            "queries": [clean_query(q) for q in queries],
            "topk": check_k(k),
            "return_scores": True,
        }

    def _delay(self, attempt: int) -> float:
        return self.backoff * 2**attempt

    def _outcome(
        self, response: httpx.Response | Exception, expected: int
    ) -> list[list[Doc]] | str:
        """The docs, or why this attempt failed (retryable failures only; others raise)."""
        if isinstance(response, Exception):
            return f"{type(response).__name__}: {response}"
        if response.status_code in RETRYABLE_STATUS:
            return f"HTTP {response.status_code}"
        if response.status_code != 200:
            raise RetrieverError(
                f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            payload = response.json()
        except ValueError:
            raise RetrieverError(f"{self.url} answered with text that is not JSON") from None
        return parse_results(payload, expected)

    def _give_up(self, reason: str) -> RetrieverError:
        return RetrieverError(
            f"retrieval server {self.url} failed {self.retries + 1} times ({reason})"
        )

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Doc]]:
        payload = self._payload(queries, k)
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout, headers=self.headers)
        reason = ""
        for attempt in range(self.retries + 1):
            try:
                response: httpx.Response | Exception = self._client.post(self.url, json=payload)
            except httpx.HTTPError as exc:
                response = exc
            outcome = self._outcome(response, len(queries))
            if not isinstance(outcome, str):
                return outcome
            reason = outcome
            if attempt < self.retries:
                time.sleep(self._delay(attempt))
        raise self._give_up(reason)

    async def asearch_many(self, queries: Sequence[str], k: int) -> list[list[Doc]]:
        """Async twin of :meth:`search_many`."""
        payload = self._payload(queries, k)
        client = self._async_client()
        reason = ""
        for attempt in range(self.retries + 1):
            try:
                response: httpx.Response | Exception = await client.post(self.url, json=payload)
            except httpx.HTTPError as exc:
                response = exc
            outcome = self._outcome(response, len(queries))
            if not isinstance(outcome, str):
                return outcome
            reason = outcome
            if attempt < self.retries:
                await asyncio.sleep(self._delay(attempt))
        raise self._give_up(reason)

    def _async_client(self) -> httpx.AsyncClient:
        """The connection pool of the running event loop (a client is bound to its loop)."""
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(timeout=self.timeout, headers=self.headers)
            self._async_clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the connection pool of the running event loop."""
        client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    async def asearch(self, query: str, k: int = 3) -> list[Doc]:
        return (await self.asearch_many([query], k))[0]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
