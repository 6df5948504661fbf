"""Text spaces: observations and actions of palaestra envs are arbitrary strings."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

_SAMPLE_ALPHABET = np.array(list(string.printable + "äöüßéñ中文😀"))


class TextSpace(spaces.Space[str]):
    """Any Python string up to ``max_length`` characters (no charset restriction).

    ``gymnasium.spaces.Text`` only admits a fixed charset, but model outputs and env
    observations are arbitrary unicode. ``sample()`` draws short random strings, which
    is what ``check_env`` and garbage-action tests need.

    >>> TextSpace().contains("anything at all ✓")
    True
    """

    def __init__(self, max_length: int = 1 << 24, sample_length: int = 32, seed: int | None = None):
        if max_length < 0 or sample_length < 0:
            raise ValueError("max_length and sample_length must be >= 0")
        self.max_length = max_length
        self.sample_length = min(sample_length, max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ValueError("TextSpace.sample does not support masks")
        length = int(self.np_random.integers(0, self.sample_length + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length
