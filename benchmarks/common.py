"""Shared pieces of the benchmarks: a binary-search player, env adapters, timing helpers."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from palaestra.agents.base import Action, Conversation
from palaestra.core.env import Env

LOW, HIGH = 1, 50  # guess-the-number range of both games benchmarked (GEM's "-hard", ours default)
_NUMBER = re.compile(r"\d+")


@dataclass(slots=True)
class SearchState:
    """Interval still open and the last guess, for one episode."""

    low: int = LOW
    high: int = HIGH
    last: int = 0

    def guess(self, observation: str | None) -> str:
        """Update from the feedback on the last guess (if any), then guess the midpoint."""
        if observation is not None and self.last:
            if "higher" in observation:
                self.low = self.last + 1
            elif "lower" in observation:
                self.high = self.last - 1
        self.last = (self.low + self.high) // 2
        return "\\boxed{" + str(self.last) + "}"


class BinarySearchAgent:
    """The benchmark's instant agent for the palaestra runner (state kept per episode)."""

    name = "binary-search"

    def act(self, conversation: Conversation) -> Action:
        state = conversation.state.get("search")
        if state is None:
            state = conversation.state["search"] = SearchState()
            return Action(state.guess(None))
        return Action(state.guess(conversation.last_observation))


class GemGuessTheNumber(Env):
    """GEM's guess-the-number (1..50) behind the palaestra ``Env`` API, for the runner."""

    threaded_step = False
    max_turns = 7

    def __init__(self) -> None:
        super().__init__()
        import gem

        self.inner = gem.make("game:GuessTheNumber-v0-hard")

    def reset(self, *, seed=None, options=None):
        return self.inner.reset(seed=seed)

    def step(self, action):
        return self.inner.step(action)


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    """Run ``fn`` (which returns an episode count); returns (episodes, seconds)."""
    start = time.perf_counter()
    episodes = fn()
    return episodes, time.perf_counter() - start
