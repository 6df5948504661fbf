"""A simulated search engine (ZeroSearch): a model writes the documents a query returns.

Any palaestra agent plays the engine (a served model: ``"openai:MODEL@URL"``); with
probability ``noise`` a query gets documents written to look relevant while lacking the
answer (ZeroSearch's noisy documents; raise ``noise`` over training as its curriculum
does). Whether a query is noisy is drawn from ``seed`` and the query, so the same query
gets the same kind of documents in every episode.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from palaestra.agents import Agent, Conversation, make_agent, next_action
from palaestra.tools.function import run_coroutine
from palaestra.tools.search.base import Doc, Retriever, check_k, clean_query

USEFUL = (
    "You are a search engine. Write {k} short documents (2-4 sentences each) that a search "
    "for the query below would return and that help answer it."
)
NOISY = (
    "You are a search engine. Write {k} short documents (2-4 sentences each) that a search "
    "for the query below would return: they should look relevant but must not contain the "
    "information needed to answer it."
)
LAYOUT = (
    "\nWrite each document as a line `Title: <title>` followed by its text, and separate the "
    "documents with a blank line. Write nothing else.\n\nQuery: {query}"
)
_TITLE = re.compile(r"^\s*(?:\*\*)?title(?:\*\*)?\s*:\s*(.*)$", re.IGNORECASE)


def parse_documents(text: str, k: int, query: str) -> list[Doc]:
    """Up to ``k`` documents from the engine's text (blocks separated by blank lines)."""
    docs = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.strip().splitlines()
        if not lines:
            continue
        match = _TITLE.match(lines[0])
        title, body = (match.group(1).strip(), lines[1:]) if match else ("", lines)
        body_text = " ".join(line.strip() for line in body if line.strip())
        if body_text:
            docs.append(Doc(f"sim-{_digest(query)}-{len(docs)}", title, body_text))
        if len(docs) == k:
            break
    return docs


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


class SimulatedRetriever(Retriever):
    """Documents written by ``agent`` (an agent or an agent spec such as
    ``"openai:Qwen/Qwen2.5-3B-Instruct@http://localhost:8000/v1"``).

    >>> engine = SimulatedRetriever("openai:sim@http://localhost:8000/v1", noise=0.2)  # doctest: +SKIP
    """

    def __init__(self, agent: Agent | str, *, noise: float = 0.0, seed: int = 0):
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.agent = make_agent(agent) if isinstance(agent, str) else agent
        self.noise = noise
        self.seed = seed

    def is_noisy(self, query: str) -> bool:
        """Whether ``query`` gets noisy documents (fixed per seed and query)."""
        draw = np.random.default_rng([self.seed, int(_digest(clean_query(query)), 16)]).random()
        return bool(draw < self.noise)

    def prompt(self, query: str, k: int) -> str:
        """What the engine is asked for ``query``."""
        query = clean_query(query)
        head = NOISY if self.is_noisy(query) else USEFUL
        return head.format(k=k) + LAYOUT.format(query=query)

    async def asearch(self, query: str, k: int = 3) -> list[Doc]:
        if not clean_query(query):
            return []
        conversation = Conversation(
            [{"role": "user", "content": self.prompt(query, check_k(k))}],
            seed=[self.seed, int(_digest(query), 16) % 2**32],
        )
        action = await next_action(self.agent, conversation)
        return parse_documents(action.text, k, query)

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Doc]]:
        return [run_coroutine(self.asearch(query, k)) for query in queries]
