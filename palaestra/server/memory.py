"""Handing the memory of closed sessions back to the system (glibc's allocator).

glibc keeps the memory a process frees for its next allocations, and with a thread per
session it spreads allocations over up to eight arenas per CPU: once many sessions' envs
are closed, their memory is free inside the process but still counted in its RSS.
Measured with 500 ``sql:Mixed-v0`` sessions (``benchmarks/bench_serve_soak.py``): once
every session had closed, the server still held 1,265 MB; with two arenas
(:func:`cap_malloc_arenas`, which ``palaestra serve`` sets) and :func:`trim` after sessions
close, 221 MB. Both do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

MALLOC_ARENAS = 2
"""Arenas the ``palaestra serve`` process (and the processes it starts) allocate from: the
envs' Python code holds the GIL, so more arenas mostly keep freed memory apart."""
_M_ARENA_MAX = -8
"""``mallopt``'s parameter number for ``M_ARENA_MAX`` (``malloc.h``)."""


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        library = ctypes.CDLL(name)
    except OSError:
        return None
    return library if hasattr(library, "malloc_trim") and hasattr(library, "mallopt") else None


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Allocate from at most ``arenas`` arenas in this process (for arenas made from now
    on: call it before starting threads) and in the processes it starts later (through
    ``MALLOC_ARENA_MAX``). A ``MALLOC_ARENA_MAX`` already set is left to rule (glibc read
    it at start). Whether the cap was set."""
    glibc = _glibc()
    if glibc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    os.environ["MALLOC_ARENA_MAX"] = str(arenas)
    return bool(glibc.mallopt(_M_ARENA_MAX, arenas))


def trim() -> bool:
    """Return the free memory of every arena to the system (``malloc_trim(0)``: tens of
    milliseconds for a few hundred MB; it releases the GIL). Whether any was returned."""
    glibc = _glibc()
    return bool(glibc.malloc_trim(0)) if glibc is not None else False
