"""Reward corruption for robustness studies: random flips and a reasoning-pattern reward.

Flips use the semantics of the env-level ``palaestra.core.wrappers.RewardNoise``: with
probability ``p`` a reward r becomes ``low + high - r`` (1 <-> 0 for a 0/1 reward).

>>> noisy = NoisyReward(lambda completion: 1.0, p=1.0, seed=0)
>>> noisy("anything")
0.0
>>> reasoning_pattern_reward("First, I need to find x. Let me check: x = 2.", target=2)
1.0
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from palaestra.core.wrappers import flip_reward

DEFAULT_REASONING_PHRASES = (
    "first, i need to",
    "let me check",
    "let's verify",
    "wait",
    "step by step",
    "therefore",
    "double-check",
)
"""Phrases of the reasoning-pattern reward (lowercase; matched case-insensitively)."""


class NoisyReward:
    """Wrap a reward function so that each result is flipped with probability ``p``.

    The flips draw from a private generator seeded by ``seed`` (thread-safe), so the same
    seed and the same call order give the same corruption. ``bounds`` are the reward's range.
    ``last_clean`` holds the uncorrupted value of the latest call, for logging.
    """

    def __init__(
        self,
        fn: Callable[..., float],
        p: float,
        *,
        seed: int | None = None,
        bounds: tuple[float, float] = (0.0, 1.0),
    ):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"flip probability p must be in [0, 1], got {p}")
        if inspect.iscoroutinefunction(fn):
            raise TypeError("NoisyReward wraps sync reward functions; await async ones first")
        self.fn = fn
        self.p = p
        self.bounds = bounds
        self.last_clean: float | None = None
        self.__name__ = f"noisy_{getattr(fn, '__name__', 'reward')}"
        self.__signature__ = inspect.signature(fn)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> float:
        clean = float(self.fn(*args, **kwargs))
        with self._lock:
            flip = self._rng.random() < self.p
        self.last_clean = clean
        return flip_reward(clean, self.bounds) if flip else clean


def reasoning_pattern_reward(
    completion: str,
    phrases: Sequence[str] = DEFAULT_REASONING_PHRASES,
    *,
    target: int = 3,
) -> float:
    """``min(1, distinct listed phrases found / target)``, ignoring whether the answer is right.

    A reward that checks no answer, from the noisy-reward study in which rewarding reasoning
    phrases alone still trained a math model to over 70%.
    """
    if target < 1:
        raise ValueError(f"target must be >= 1, got {target}")
    text = completion.lower()
    hits = sum(1 for phrase in {p.lower() for p in phrases} if phrase in text)
    return min(1.0, hits / target)
