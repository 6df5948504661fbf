"""Several rollout engines behind one agent: load balancing with sticky episodes.

A new episode goes to the engine with the fewest requests in flight; every later turn of that
episode goes to the same engine, so the engine's prefix cache holds the conversation so far.
An engine that fails is skipped for ``cooldown_s`` and the episode moves to another engine
(the conversation is resent in full there, so correctness never depends on the cache).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from palaestra.agents.base import Action, Agent, Conversation, agent_name, close_agent, next_action

_ENGINE = "router.engine"
"""Key of the episode's engine in ``Conversation.state``."""


class RouterAgent:
    """Routes episodes over ``engines`` (agents, e.g. one :class:`OpenAIAgent` per server).

    >>> agent = RouterAgent.from_urls("Qwen/Qwen3-0.6B", ["http://a:8000/v1", "http://b:8000/v1"])  # doctest: +SKIP
    """

    def __init__(self, engines: Sequence[Agent], *, cooldown_s: float = 30.0):
        if not engines:
            raise ValueError("RouterAgent needs at least one engine")
        self.engines = list(engines)
        self.cooldown_s = cooldown_s
        self.in_flight = [0] * len(self.engines)
        self.episodes = [0] * len(self.engines)
        """Episodes each engine has been given (for reports and tests)."""
        self._down_until = [0.0] * len(self.engines)
        self.name = f"router[{len(self.engines)}]:{agent_name(self.engines[0])}"
        self.tokenizer = getattr(self.engines[0], "tokenizer", None)

    @classmethod
    def from_urls(cls, model: str, base_urls: Sequence[str], **options: Any) -> RouterAgent:
        """One OpenAI-compatible engine per URL (``options`` go to each :class:`OpenAIAgent`)."""
        from palaestra.agents.openai import OpenAIAgent

        return cls([OpenAIAgent(model, url, **options) for url in base_urls])

    async def act(self, conversation: Conversation) -> Action:
        tried: set[int] = set()
        engine = conversation.state.get(_ENGINE)
        while True:
            if engine is None or engine in tried:
                engine = self._pick(exclude=tried)
                conversation.state[_ENGINE] = engine
                self.episodes[engine] += 1
            self.in_flight[engine] += 1
            try:
                return await next_action(self.engines[engine], conversation)
            except Exception:
                self._down_until[engine] = time.monotonic() + self.cooldown_s
                tried.add(engine)
                if len(tried) == len(self.engines):
                    raise
            finally:
                self.in_flight[engine] -= 1

    def _pick(self, exclude: set[int]) -> int:
        """The least busy engine not in ``exclude``, preferring engines that are up."""
        now = time.monotonic()
        candidates = [i for i in range(len(self.engines)) if i not in exclude]
        up = [i for i in candidates if self._down_until[i] <= now]
        return min(up or candidates, key=lambda i: (self.in_flight[i], self.episodes[i]))

    async def aclose(self) -> None:
        for engine in self.engines:
            await close_agent(engine)
