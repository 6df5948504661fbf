"""Documents, the retriever protocol, and the Search-R1 text shapes every retriever shares.

A retriever answers ``search(query, k) -> list[Doc]`` (best first) and the batched
``search_many``; ``asearch`` is the async twin (native in the HTTP and simulated
retrievers). Queries are cleaned by :func:`clean_query` first, so hostile queries (empty,
a megabyte, regex characters) cost little and never raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

MAX_QUERY_CHARS = 2000
"""Longer queries are cut (a megabyte query must not stall the index or the server)."""


@dataclass(frozen=True)
class Doc:
    """One retrieved document: its ``id``, ``title``, ``text`` and retrieval ``score``."""

    id: str
    title: str
    text: str
    score: float = 0.0

    @property
    def contents(self) -> str:
        """The Search-R1 / FlashRAG ``contents`` field: the quoted title, a newline, the text.

        >>> Doc("7", "Ada Lovelace", "Ada was a mathematician.").contents
        '"Ada Lovelace"\\nAda was a mathematician.'
        """
        return f'"{self.title}"\n{self.text}'

    @classmethod
    def from_contents(cls, id: str, contents: str, score: float = 0.0) -> Doc:
        """Inverse of :attr:`contents`. As Search-R1 reads a document, the first line is the
        title (its quotes dropped, if it has them) and the rest the text.

        >>> Doc.from_contents("7", "Ada Lovelace\\nAda was a mathematician.").title
        'Ada Lovelace'
        """
        first, _, rest = contents.partition("\n")
        if len(first) >= 2 and first.startswith('"') and first.endswith('"'):
            first = first[1:-1]
        return cls(id, first, rest, score)


def clean_query(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS`, NUL bytes dropped, whitespace collapsed."""
    return " ".join(query[:MAX_QUERY_CHARS].replace("\x00", " ").split())


def check_k(k: int) -> int:
    """``k`` if it is a positive int, else a ``ValueError`` that says so."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return k


class Retriever:
    """Base of retrievers: subclasses implement :meth:`search_many`."""

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Doc]]:
        """The top ``k`` documents of each query, best first."""
        raise NotImplementedError

    def search(self, query: str, k: int = 3) -> list[Doc]:
        """The top ``k`` documents for ``query``, best first (fewer only when the corpus has
        fewer)."""
        return self.search_many([query], k)[0]

    async def asearch(self, query: str, k: int = 3) -> list[Doc]:
        """Async twin of :meth:`search` (a worker thread unless a subclass waits on I/O)."""
        return await asyncio.to_thread(self.search, query, k)

    def close(self) -> None:
        """Free connections or models (nothing by default)."""


def passages_text(docs: Sequence[Doc]) -> str:
    """Documents as Search-R1 shows them to the model: ``Doc 1(Title: "T") text`` per line
    (the title line of the ``contents`` field, quotes included, then the text).

    >>> passages_text([Doc("1", "Ada", "A mathematician.")])
    'Doc 1(Title: "Ada") A mathematician.'
    """
    return "\n".join(f'Doc {i}(Title: "{d.title}") {d.text}' for i, d in enumerate(docs, start=1))
