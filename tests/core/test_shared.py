"""process_wide: one object per process, made once however many threads ask at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from palaestra.core.shared import process_wide


def test_threads_asking_at_once_get_the_one_object_made_once():
    made = []

    @process_wide
    def pool() -> object:
        """A pool."""
        time.sleep(0.05)  # long enough for every thread to ask before it is made
        made.append(object())
        return made[-1]

    barrier = threading.Barrier(8)

    def ask(_: int) -> object:
        barrier.wait()
        return pool()

    with ThreadPoolExecutor(8) as threads:
        got = set(map(id, threads.map(ask, range(8))))
    assert len(made) == 1 and got == {id(made[0])}
    assert pool.__doc__ == "A pool." and pool.__name__ == "pool"
    other = object()
    pool.replace(other)
    assert pool() is other and len(made) == 1
