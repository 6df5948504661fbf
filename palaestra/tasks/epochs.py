"""Walking a task source in epochs without replacement, reproducibly and resumably.

Position ``p`` of a run (the count of tasks drawn so far) maps to a row by a pure function
of the seed: epoch ``p // n`` is a permutation of the ``n`` training rows drawn from
``(seed, epoch)``, so a run resumed from a checkpoint that saved its position continues with
exactly the rows it would have drawn.
"""

from __future__ import annotations

import functools
from collections.abc import Container

import numpy as np


class EpochOrder:
    """Rows ``0 .. size-1`` minus ``held_out``, shuffled per epoch from ``seed``.

    >>> order = EpochOrder(4, seed=0)
    >>> sorted(order.row(p) for p in range(4)) == [0, 1, 2, 3]   # each row once per epoch
    True
    """

    def __init__(self, size: int, *, seed: int, held_out: Container[int] = ()):
        self.rows = np.array([row for row in range(size) if row not in held_out], dtype=np.int64)
        if len(self.rows) == 0:
            raise ValueError(f"no training rows left: all {size} rows are held out")
        self.seed = seed

    def __len__(self) -> int:
        """Rows per epoch."""
        return len(self.rows)

    def row(self, position: int) -> int:
        """The row at ``position`` of the run (epoch ``position // len(self)``)."""
        epoch, offset = divmod(position, len(self.rows))
        return int(self._permutation(epoch)[offset])

    @functools.lru_cache(maxsize=2)  # noqa: B019 (a few epochs per instance; instances are few)
    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.rows)
