"""Synthetic SQLite databases in five domains, one per seed, built on first use and cached.

>>> path = database_path("shop", seed=0)   # built once, then reused from the cache  # doctest: +SKIP

Each domain (:mod:`palaestra.envs.sql.domains`) has foreign keys (one of them to its own
table), NULLs, dates, text with quotes and non-ASCII letters (``O'Brien``, ``Zoë``) and
skewed distributions; table sizes, the popular items and every value change with the seed,
so an answer on one database says little about the next.

A database is generated in memory and written to a temporary name, then renamed into the
cache (:func:`cache_dir`), so concurrent processes never see a half-written file; the file
name carries the generator version. The cache holds at most :data:`MAX_CACHED_DATABASES`
files besides those in use: each use sets its file's access time (never its modification
time, which the DuckDB worker reads to know its loaded copy is current), and writing a new
one deletes the least recently used, except files some process holds
(:class:`~palaestra.verifiers.sql.FileHold`; every open
:class:`~palaestra.verifiers.sql.SQLiteDatabase` holds its file). A caller that opens the
file later passes ``hold=`` to hold it before the cache evicts anything; a file that went
anyway (another machine's process, a user clearing the cache) is built again from its name
when it is next opened (:func:`~palaestra.verifiers.sql.rebuild`): building is deterministic.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from palaestra.core.cache import cache_root
from palaestra.envs.sql.domains import DOMAINS as _MODULES
from palaestra.envs.sql.domains.base import GENERATOR_VERSION, Gen
from palaestra.verifiers.sql import HOLD_TRIES, add_rebuilder, delete_unless_held

__all__ = [
    "DOMAINS",
    "GENERATOR_VERSION",
    "MAX_CACHED_DATABASES",
    "SUITE_FIRST_SEED",
    "cache_dir",
    "database_path",
    "suite_paths",
    "touch",
]

DOMAINS: dict[str, Callable[[sqlite3.Connection, Gen], None]] = {
    name: module.build for name, module in _MODULES.items()
}
MAX_CACHED_DATABASES = 256
"""Generated databases kept in one cache folder (about 250 KB each)."""
STALE_TEMPORARY_S = 3600.0
"""A temporary file this old in a cache folder was left by a writer that died: deleted."""


def cache_dir() -> Path:
    """Where generated databases live: ``sql/`` under :func:`~palaestra.core.cache.cache_root`."""
    return cache_root() / "sql"


def database_path(
    domain: str,
    seed: int = 0,
    directory: str | Path | None = None,
    *,
    hold: Callable[[Path], object] | None = None,
) -> Path:
    """The SQLite file of ``domain`` generated from ``seed``; built on first use.

    ``hold``: called with the path once the file is there and before the cache evicts
    anything (:meth:`FileHold.take <palaestra.verifiers.sql.FileHold.take>`), so the file
    stays until the caller lets go; a :class:`FileNotFoundError` from it (the file went
    in between) builds it again. Without it the path is not held: open it soon
    (:class:`~palaestra.verifiers.sql.SQLiteDatabase` holds it, building it again if it
    went)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown SQL domain {domain!r}; domains: {sorted(DOMAINS)}")
    folder = Path(directory) if directory is not None else cache_dir()
    path = folder / f"{domain}-seed{seed}-v{GENERATOR_VERSION}.sqlite"

    def build() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        _build(domain, seed, path)

    return cached_file(path, build, hold, "*-seed*-v*.sqlite", MAX_CACHED_DATABASES)


def cached_file(
    path: Path,
    build: Callable[[], None],
    hold: Callable[[Path], object] | None,
    pattern: str,
    keep: int,
) -> Path:
    """``path``, built by ``build`` where it is missing, then held by ``hold`` (built again
    if it went in between); after a build, the files of its folder matching ``pattern``
    beyond the ``keep`` most recently used are deleted (:func:`evict`). Threads that want
    the same missing file build it once: the others wait for it (a GRPO group's envs
    grading on one fuzzed copy at once)."""
    built = False
    for attempt in range(HOLD_TRIES):
        if not touch(path):
            with _BUILDING[hash(path) % len(_BUILDING)]:
                if not touch(path):
                    build()
                    built = True
        try:
            if hold is not None:
                hold(path)
            break
        except FileNotFoundError:
            if attempt == HOLD_TRIES - 1:
                raise
    if built:
        evict(path.parent, pattern, keep)
    return path


_BUILDING = [threading.Lock() for _ in range(64)]
"""Locks a build of a file takes (by its path's hash), so one thread builds it."""


def touch(path: Path) -> bool:
    """Mark ``path`` used now (its access time; never its modification time): whether it
    is there."""
    with contextlib.suppress(OSError):  # another process may have just evicted it
        os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns))
        return True
    return False


_NAME = re.compile(rf"(?P<domain>[a-z]+)-seed(?P<seed>\d+)-v{GENERATOR_VERSION}")


def _rebuild(path: Path, hold: Callable[[Path], object]) -> bool:
    """Build a generated database again from its file name (for
    :func:`~palaestra.verifiers.sql.rebuild`)."""
    match = _NAME.fullmatch(path.stem) if path.suffix == ".sqlite" else None
    if match is None or match["domain"] not in DOMAINS:
        return False
    database_path(match["domain"], int(match["seed"]), path.parent, hold=hold)
    return True


add_rebuilder(_rebuild)


SUITE_FIRST_SEED = 2**31 - 64
"""Seeds of the test-suite databases (:func:`suite_paths`), far from any episode's."""


def suite_paths(
    domain: str,
    size: int,
    directory: str | Path | None = None,
    *,
    hold: Callable[[Path], object] | None = None,
) -> list[Path]:
    """``size`` databases of ``domain`` from seeds no episode draws, for test-suite grading
    (``execution_match(..., suite=...)``): the same for every episode, so their gold
    results are computed once per question. ``hold``: as for :func:`database_path`."""
    if not 0 <= size <= 64:
        raise ValueError(f"a test suite holds 0 to 64 databases, got {size}")
    return [database_path(domain, SUITE_FIRST_SEED + i, directory, hold=hold) for i in range(size)]


def _build(domain: str, seed: int, path: Path) -> None:
    """Generate in memory, write to a temporary file, rename it to ``path``."""
    memory = sqlite3.connect(":memory:")
    try:
        with memory:
            DOMAINS[domain](memory, Gen(seed, domain))
            _index_foreign_keys(memory)

        def backup(temporary: str) -> None:
            target = sqlite3.connect(temporary)
            memory.backup(target)
            target.close()

        write_read_only(path, f".{domain}-", backup)
    finally:
        memory.close()


def write_read_only(path: Path, prefix: str, write: Callable[[str], None]) -> None:
    """Write ``path`` as the caches do: ``write`` fills a temporary file beside it (dot-named
    from ``prefix``, so eviction leaves it alone), which is made read-only and renamed to
    ``path``; nothing is left behind if ``write`` fails."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".sqlite")
    os.close(handle)
    try:
        write(temporary)
        os.chmod(temporary, 0o444)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _index_foreign_keys(connection: sqlite3.Connection) -> None:
    """An index on every foreign key column, as a real schema would have (correlated
    subqueries over a key then take a lookup, not a scan)."""
    tables = [
        r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    ]
    for table in tables:
        for key in connection.execute(f"PRAGMA foreign_key_list({table})").fetchall():
            column = key[3]
            connection.execute(f"CREATE INDEX idx_{table}_{column} ON {table} ({column})")


def evict(folder: Path, pattern: str, keep: int) -> None:
    """Delete the least recently used files of ``folder`` matching ``pattern`` beyond
    ``keep``, skipping files in use (:func:`~palaestra.verifiers.sql.hold_file`) and
    temporary files being written (dot-named; one older than :data:`STALE_TEMPORARY_S` was
    left by a writer that died, and goes)."""
    files = []
    for file in folder.glob(pattern):
        with contextlib.suppress(OSError):
            if not file.name.startswith("."):
                files.append((file.stat().st_atime_ns, file))
            elif time.time() - file.stat().st_mtime > STALE_TEMPORARY_S:
                file.unlink()
    files.sort()
    for _, file in files[: max(0, len(files) - keep)]:
        with contextlib.suppress(OSError):
            delete_unless_held(file)
