"""Problems and task sources: the items a dataset-backed env serves, by index.

A task source is anything with ``len()`` and integer indexing that returns a
:class:`Problem` (a list of problems is one). Which row a reset serves follows one rule,
:func:`row_for_reset`: ``options["index"]`` if given, else the reset seed modulo the number
of rows (so seeds ``0 .. n-1`` serve every row exactly once), else a random row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Problem:
    """One item: the prompt shown to the agent, the reference answer (None when a scorer
    grades without one), an id for reports, and whatever else the grader needs in ``data``."""

    prompt: str
    answer: Any = None
    id: str | None = None
    data: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class TaskSource(Protocol):
    """Problems by index: ``len(source)`` and ``source[i]`` (a ``list[Problem]`` is one)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Problem: ...


def row_for_reset(
    size: int, seed: int | None, options: Mapping[str, Any] | None, rng: np.random.Generator
) -> int:
    """The row a reset serves: ``options["index"]``, else ``seed % size``, else a random row.

    >>> row_for_reset(164, 170, None, np.random.default_rng())
    6
    """
    if size < 1:
        raise ValueError("the task source has no problems")
    index = (options or {}).get("index")
    if index is not None:
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"options['index'] must be an int, got {type(index).__name__}")
        if not 0 <= index < size:
            raise IndexError(f"options['index']={index} is out of range 0..{size - 1}")
        return int(index)
    if seed is not None:
        return seed % size
    return int(rng.integers(size))
