"""The ``search`` tool: a query in, the top documents out, with a per-episode call budget.

With ``wrap="information"`` results come back as
``<information>Doc 1(Title: "T") text ...</information>``; by default they are the tool
message itself. (Search-R1's own protocol is :mod:`palaestra.envs.search.search_r1`.) A failing retriever (a server that is down or slow) gives
an ``error: ...`` observation and the episode goes on.
"""

from __future__ import annotations

from typing import Any

from palaestra.tools.function import FunctionTool
from palaestra.tools.search.base import Doc, Retriever, check_k, passages_text

DESCRIPTION = "Search the knowledge base; returns the most relevant documents for the query."
MAX_OUTPUT_CHARS = 8000
NO_RESULTS = "No documents found."


class SearchTool(FunctionTool):
    """Search ``retriever`` for the top ``k`` documents; at most ``max_calls`` calls per
    episode (None: no limit). A :class:`~palaestra.tools.Tool`; the retriever stays open
    when the tool closes (its owner closes it)."""

    def __init__(
        self,
        retriever: Retriever,
        *,
        k: int = 3,
        max_calls: int | None = None,
        wrap: str | None = None,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ):
        if max_calls is not None and max_calls < 1:
            raise ValueError(f"max_calls must be >= 1 or None, got {max_calls}")
        self.retriever = retriever
        self.k = check_k(k)
        self.max_calls = max_calls
        self.wrap = wrap
        self.calls = 0
        super().__init__(self.search, description=DESCRIPTION, max_output_chars=max_output_chars)

    def search(self, query: str) -> str:
        """Search the knowledge base (what ``call`` runs after checking the arguments).

        Args:
            query: what to search for
        """
        refusal = self._admit()
        return refusal or self.format_docs(self.retriever.search(query, self.k))

    async def acall(self, arguments: dict[str, Any]) -> str:
        checked = self.validate(arguments)
        if isinstance(checked, str):
            return checked
        refusal = self._admit()
        if refusal:
            return refusal
        try:
            return self.format_docs(await self.retriever.asearch(checked["query"], self.k))
        except Exception as error:  # the retriever failed: the agent sees it, the episode goes on
            return f"error: search failed: {type(error).__name__}: {error}"

    def _admit(self) -> str:
        """Count a call that runs; the refusal text once the budget is spent."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"error: no searches left ({self.max_calls} used); give your answer"
        self.calls += 1
        return ""

    def render(self, result: str) -> str:
        """``call``'s result as it is: :meth:`format_docs` already capped the documents."""
        return result

    def format_docs(self, docs: list[Doc]) -> str:
        """The observation for ``docs``."""
        text = passages_text(docs) if docs else NO_RESULTS
        if len(text) > self.max_output_chars:
            text = text[: self.max_output_chars] + " (truncated)"
        return f"<{self.wrap}>{text}</{self.wrap}>" if self.wrap else text

    def reset(self) -> None:
        """A new episode: the call budget is full again."""
        self.calls = 0

    def close(self) -> None:
        """Nothing: the retriever belongs to whoever made it (a search env closes its own)."""
