"""Search: documents and retrievers (local BM25 or dense, an HTTP server, a simulated engine)
and the ``search`` tool that envs add."""

from collections.abc import Mapping, Sequence
from typing import Any

from palaestra.tools.search.base import Doc, Retriever, clean_query, passages_text
from palaestra.tools.search.bm25 import BM25Retriever
from palaestra.tools.search.dense import DenseRetriever
from palaestra.tools.search.remote import RemoteRetriever, RetrieverError
from palaestra.tools.search.simulated import SimulatedRetriever
from palaestra.tools.search.tool import SearchTool

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Doc",
    "RemoteRetriever",
    "Retriever",
    "RetrieverError",
    "RetrieverSpec",
    "SearchTool",
    "SimulatedRetriever",
    "clean_query",
    "make_retriever",
    "passages_text",
]

RetrieverSpec = str | Mapping[str, Any] | Retriever
"""``"bm25"``, a server URL, ``{"kind": "bm25" | "dense" | "remote" | "simulated", **options}``,
or a retriever object."""


def make_retriever(spec: RetrieverSpec, corpus: Sequence[Doc] = ()) -> Retriever:
    """A retriever from ``spec``; ``"bm25"`` indexes ``corpus``.

    >>> make_retriever("http://127.0.0.1:8000/retrieve")
    RemoteRetriever('http://127.0.0.1:8000/retrieve')
    >>> make_retriever({"kind": "remote", "url": "http://10.0.0.2:8000", "token": "t"}).url
    'http://10.0.0.2:8000/retrieve'
    """
    if isinstance(spec, Retriever):
        return spec
    if isinstance(spec, str):
        if spec.startswith(("http://", "https://")):
            return RemoteRetriever(spec)
        spec = {"kind": spec}
    options = dict(spec)
    kind = options.pop("kind", None)
    if kind == "bm25":
        return BM25Retriever(corpus, **options)
    if kind == "dense":
        return DenseRetriever(corpus, **options)
    if kind == "remote":
        return RemoteRetriever(**options)
    if kind == "simulated":
        return SimulatedRetriever(**options)
    raise ValueError(
        f"unknown retriever {spec!r}; use 'bm25', a server URL, or "
        "{'kind': 'bm25' | 'remote' | 'simulated', ...}"
    )
