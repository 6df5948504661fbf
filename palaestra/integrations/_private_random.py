"""A private copy of Python's global ``random`` state, for packages that draw from it.

GEM's and TextArena's games seed and draw from the *global* ``random`` module. An adapter
gives each env a :class:`PrivateRandom` and runs every call into the package inside
:meth:`PrivateRandom.active`, which swaps the env's own state in under a process-wide lock
and puts the caller's back afterwards. So the same seed gives the same episode under any
concurrency, and the package never disturbs the caller's random state.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator

import numpy as np

_global_rng_lock = threading.RLock()


class PrivateRandom:
    """A private copy of Python's global ``random`` state, swapped in around a call.

    numpy's global state is only saved and restored around calls that reseed it
    (``keep_numpy=True``): copying it costs ~50x more, and the games draw from ``random``.
    """

    def __init__(self, seed: int = 0) -> None:
        self._state = random.Random(seed).getstate()

    @contextlib.contextmanager
    def active(self, *, keep_numpy: bool = False) -> Iterator[None]:
        with _global_rng_lock:
            saved = random.getstate()
            saved_numpy = np.random.get_state() if keep_numpy else None
            random.setstate(self._state)
            try:
                yield
            finally:
                self._state = random.getstate()
                random.setstate(saved)
                if saved_numpy is not None:
                    np.random.set_state(saved_numpy)
