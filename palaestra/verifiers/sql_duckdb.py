"""DuckDB as the SQL backend (extra ``duckdb``): the same databases, queries in DuckDB's dialect.

>>> database = DuckDBDatabase.from_sqlite("shop.sqlite")  # doctest: +SKIP
>>> database.query("SELECT COUNT(*) FROM orders").rows  # doctest: +SKIP
[(2000,)]

Every query runs in a worker process (:class:`~palaestra.verifiers.worker.WorkerPool`)
that holds the databases in memory, so no query outlasts its limits:

* **time**: DuckDB is interrupted at the time limit; a single call it cannot interrupt
  (``repeat('x', 10**9)``) gets its worker killed :data:`KILL_GRACE_S` later;
* **memory**: DuckDB's ``memory_limit`` is 512 MB (no spilling to
  disk) and the worker's address space is capped at :data:`WORKER_MEMORY_MB`, which
  also stops the allocations DuckDB does not count (one huge string);
* **result**: at most ``max_rows`` rows and
  :data:`~palaestra.verifiers.sql_backend.MAX_RESULT_BYTES` bytes are fetched;
* **access**: one SELECT statement (DuckDB's own parser says) on an in-memory database
  opened with external access off (no files, ``ATTACH``, ``COPY``, extensions) and its
  configuration locked; the catalog functions and views that show settings or paths
  (``duckdb_*``, ``pragma_*``, ``pg_*``, ``current_setting``, ``query``...) are refused,
  and so is naming another loaded database.

A worker (:mod:`palaestra.verifiers.sql_duckdb_worker`) copies a SQLite file's tables
into a schema of its in-memory database the first time a query needs them (50-70 ms of CPU
for a generated database) and keeps the 32 most recently used (every domain's test suite
and the episodes' own). The pool has a worker per core (at most 4), so the queries of envs
stepped on several threads run side by side; a query goes to an idle worker that served
its file lately when there is one, so a file is seldom loaded twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palaestra.core.shared import process_wide
from palaestra.verifiers.sql_backend import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    KILL_GRACE_S,
    QueryResult,
    SQLError,
    check_size,
    worker_query,
)
from palaestra.verifiers.sql_duckdb_worker import (
    UNLOADED,
    import_duckdb,
    load_database,
    read_catalog,
    run_query,
)
from palaestra.verifiers.sql_files import FileHold
from palaestra.verifiers.sql_results import results
from palaestra.verifiers.worker import WorkerError, WorkerLost, WorkerPool, WorkerTimeout

WORKER_MEMORY_MB = 1664
"""The worker process's address space (DuckDB reserves about 850 MB of it at start, and
NumPy, which copies tables in, about 120 MB)."""
LOAD_TIMEOUT_S = 120.0
CATALOG_TIMEOUT_S = 30.0


# -- the parent side -----------------------------------------------------------------------


def new_pool(workers: int | None = None) -> WorkerPool:
    """A pool of DuckDB workers (default: one per core, at most 4; each started on first
    use, stopped at exit)."""
    import_duckdb()
    return WorkerPool(
        workers,
        preload=("duckdb", "palaestra.verifiers.sql_duckdb_worker"),
        memory_mb=WORKER_MEMORY_MB,
    )


@process_wide
def default_pool() -> WorkerPool:
    """The pool DuckDB databases share by default (:func:`new_pool`'s size)."""
    return new_pool()


class DuckDBDatabase:
    """The tables of a SQLite file on DuckDB, read-only, each query in a worker (see module
    docstring); implements :class:`~palaestra.verifiers.sql_backend.Database`. ``pool``: the
    workers to use (default: :func:`default_pool`); ``kill_grace``: how long past a query's
    time limit its worker is killed."""

    dialect = "duckdb"

    def __init__(
        self,
        sqlite_path: str | Path,
        *,
        pool: WorkerPool | None = None,
        kill_grace: float = KILL_GRACE_S,
    ) -> None:
        self.path = Path(sqlite_path).resolve()
        try:  # the worker loads the file by path: no cache deletes it while this is open
            self._hold = FileHold(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(f"no SQLite database at {self.path}") from None
        self.pool = pool or default_pool()
        self.kill_grace = kill_grace

    @classmethod
    def from_sqlite(cls, path: str | Path) -> DuckDBDatabase:
        return cls(path)

    def _call(self, function: Any, *args: Any, timeout: float) -> Any:
        """``function(path, *args)`` (a catalog read or a load: trusted) in a worker (one
        that served this file lately first), once more in a fresh worker if the first was
        lost; :class:`SQLError` if it fails."""
        call = (function, (str(self.path), *args))
        key = str(self.path)
        try:
            try:
                return self.pool.call(*call, timeout=timeout, prefer=key)
            except (WorkerLost, OSError):  # a worker an earlier query broke: never reused
                return self.pool.call(*call, timeout=timeout, prefer=key)
        except WorkerTimeout:
            raise SQLError(f"the DuckDB worker did not answer within {timeout:g} s") from None
        except (WorkerError, OSError) as error:
            raise SQLError(f"error: the DuckDB worker failed ({error})") from None

    def _until_loaded(self, reply: Any, again: Callable[[], Any]) -> Any:
        """``reply``, or while it is :data:`UNLOADED` (a new worker, one that never loaded
        the file, or one that dropped it): load the file and ``again()``. Each worker that
        answers loads it once, so the tries are bounded by the pool's size."""
        for _ in range(self.pool.max_workers + 1):
            if reply != UNLOADED:
                return reply
            self._present()
            self._call(load_database, timeout=LOAD_TIMEOUT_S)
            reply = again()
        raise SQLError("error: no DuckDB worker kept the database loaded; try again")

    def _loaded_call(self, function: Any, *args: Any, timeout: float) -> Any:
        """``function`` in a worker that holds the database (loaded first where needed)."""
        again = functools.partial(self._call, function, *args, timeout=timeout)
        return self._until_loaded(again(), again)

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """Run one read-only query; raises :class:`SQLError` with the reason otherwise."""
        return self.submit(sql, timeout=timeout, max_rows=max_rows)()

    def submit(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> Callable[[], QueryResult]:
        """Send the query to the worker now (unless it ran before:
        :mod:`~palaestra.verifiers.sql_results`); the function returned
        waits for its result (call it exactly once: it hands the worker back)."""
        check_size(sql)
        args = (str(self.path), sql, max_rows, timeout)
        again = functools.partial(
            self.pool.call, run_query, args, timeout=timeout + self.kill_grace, prefer=args[0]
        )

        return results.submit(
            results.key(self.dialect, self.path, sql),
            max_rows,
            timeout,
            lambda: worker_query(
                self.pool,
                run_query,
                args,
                timeout=timeout,
                kill_grace=self.kill_grace,
                follow_up=lambda reply: self._until_loaded(reply, again),
                prefer=args[0],  # a worker that holds the database loaded
            ),
        )

    def tables(self) -> list[str]:
        return self._loaded_call(read_catalog, "tables", timeout=CATALOG_TIMEOUT_S)

    def describe(self, table: str) -> str:
        """Columns of ``table`` (name, DuckDB type, NOT NULL)."""
        return self._loaded_call(read_catalog, "describe", table, timeout=CATALOG_TIMEOUT_S)

    def schema(self) -> str:
        """The ``CREATE TABLE`` statements in DuckDB's types, one per line."""
        return self._loaded_call(read_catalog, "schema", timeout=CATALOG_TIMEOUT_S)

    def _present(self) -> None:
        """Before the worker loads the file: hold it again, built again, if it was deleted
        though held (by hand, or by another machine's process)."""
        if not self.path.is_file():
            self._hold.renew()

    def close(self) -> None:
        """Lets go of the file (the worker keeps the most recently used databases)."""
        self._hold.close()
