"""One object a whole process shares, made on first use (a worker pool, a cache).

>>> @process_wide
... def default_pool() -> list[int]:
...     return []
>>> default_pool() is default_pool()
True

Threads that ask at once get the same object: it is made under a lock, once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class process_wide(Generic[T]):
    """Wrap ``factory`` so that calling it gives its one result for the process."""

    def __init__(self, factory: Callable[[], T]) -> None:
        functools.update_wrapper(self, factory)
        self._factory = factory
        self._lock = threading.Lock()
        self._made: list[T] = []

    def __call__(self) -> T:
        with self._lock:
            if not self._made:
                self._made.append(self._factory())
            return self._made[0]

    def replace(self, value: T) -> None:
        """Share ``value`` from now on (a benchmark sizing a pool, say)."""
        with self._lock:
            self._made[:] = [value]
