"""A dense retriever: documents and queries embedded by an encoder, ranked by cosine.

The encoder is a sentence-transformers model name (extra ``search-dense``; e.g.
``"intfloat/e5-base-v2"`` with ``query_prefix="query: "``, ``doc_prefix="passage: "``) or
any function from a list of texts to a 2-D array. Document embeddings are cached on disk
by corpus hash and encoder name, like the BM25 index. Search is exact (one matrix product),
which suits corpora up to about a million documents; beyond that, serve a FAISS index with
Search-R1's retrieval server and point :class:`~palaestra.tools.search.RemoteRetriever` at it.

>>> retriever = DenseRetriever(docs, "intfloat/e5-base-v2", query_prefix="query: ",
...                            doc_prefix="passage: ")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from palaestra.core.cache import cache_root
from palaestra.tools.search.base import Doc, Retriever, check_k, clean_query
from palaestra.tools.search.bm25 import corpus_hash

Encoder = Callable[[list[str]], Any]
"""Texts -> an array of shape ``(len(texts), dim)``."""


def sentence_transformer(name: str) -> Encoder:
    """The ``encode`` of a sentence-transformers model (loaded once per call of this)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ImportError(
            "a dense retriever by model name needs sentence-transformers; install it with "
            "`pip install 'palaestra[search-dense]'` or pass an encoder function"
        ) from exc
    model = SentenceTransformer(name)
    return lambda texts: model.encode(texts, batch_size=64, show_progress_bar=False)


def _normalized(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"the encoder must return a 2-D array, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.maximum(norms, 1e-12)


class DenseRetriever(Retriever):
    """Cosine similarity between ``encoder`` embeddings of queries and documents."""

    def __init__(
        self,
        docs: Sequence[Doc],
        encoder: str | Encoder,
        *,
        encoder_name: str | None = None,
        query_prefix: str = "",
        doc_prefix: str = "",
        cache_dir: str | Path | None = None,
        cache: bool = True,
    ):
        if not docs:
            raise ValueError("DenseRetriever needs at least one document")
        name = encoder if isinstance(encoder, str) else encoder_name
        if cache and name is None:
            raise ValueError("give encoder_name= to cache the embeddings of an encoder function")
        self.docs = list(docs)
        self.encode = sentence_transformer(encoder) if isinstance(encoder, str) else encoder
        self.query_prefix = query_prefix
        key = hashlib.sha256(f"{corpus_hash(self.docs)}|{name}|{doc_prefix}".encode()).hexdigest()
        self.path = (Path(cache_dir) if cache_dir else cache_root()) / "dense" / f"{key[:32]}.npy"
        self.embeddings = self._load_or_embed(doc_prefix, cache)

    def _load_or_embed(self, doc_prefix: str, cache: bool) -> np.ndarray:
        if cache and self.path.is_file():
            return np.load(self.path)
        texts = [f"{doc_prefix}{d.title}\n{d.text}" for d in self.docs]
        embeddings = _normalized(self.encode(texts))
        if cache:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            staging = self.path.with_suffix(f".{id(self)}.tmp.npy")
            np.save(staging, embeddings)
            staging.replace(self.path)
        return embeddings

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Doc]]:
        """The ``k`` most similar documents of each query (an empty query, too: like a
        Search-R1 index, every query gets ``k`` documents when the corpus has them)."""
        k = min(check_k(k), len(self.docs))
        if not queries:
            return []
        vectors = _normalized(self.encode([self.query_prefix + clean_query(q) for q in queries]))
        scores = vectors @ self.embeddings.T
        results = []
        for row in scores:
            top = np.argsort(-row, kind="stable")[:k]
            results.append([self._hit(int(j), float(row[j])) for j in top])
        return results

    def _hit(self, index: int, score: float) -> Doc:
        doc = self.docs[index]
        return Doc(doc.id, doc.title, doc.text, score)
