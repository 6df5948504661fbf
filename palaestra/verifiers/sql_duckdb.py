"""DuckDB as the SQL backend (extra ``duckdb``): the same databases, queries in DuckDB's dialect.

>>> database = DuckDBDatabase.from_sqlite("shop.sqlite")  # doctest: +SKIP
>>> database.query("SELECT COUNT(*) FROM orders").rows  # doctest: +SKIP
[(2000,)]

Every query runs in a worker process (:class:`~palaestra.verifiers.worker.WorkerPool`)
that holds the databases in memory, so no query outlasts its limits:

* **time**: DuckDB is interrupted at the time limit; a single call it cannot interrupt
  (``repeat('x', 10**9)``) gets its worker killed :data:`KILL_GRACE_S` later;
* **memory**: DuckDB's ``memory_limit`` is :data:`DUCKDB_MEMORY_LIMIT` (no spilling to
  disk) and the worker's address space is capped at :data:`WORKER_MEMORY_MB`, which
  also stops the allocations DuckDB does not count (one huge string);
* **result**: at most ``max_rows`` rows and
  :data:`~palaestra.verifiers.sql_backend.MAX_RESULT_BYTES` bytes are fetched;
* **access**: one SELECT statement (DuckDB's own parser says) on an in-memory database
  opened with external access off (no files, ``ATTACH``, ``COPY``, extensions) and its
  configuration locked; the catalog functions and views that show settings or paths
  (``duckdb_*``, ``pragma_*``, ``pg_*``, ``current_setting``, ``query``...) are refused,
  and so is naming another loaded database.

The worker copies a SQLite file's tables into a schema of its in-memory database the first
time a query needs them (0.1-0.2 s for a generated database) and keeps the
:data:`LOADED_DATABASES` most recently used.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.verifiers.sql_backend import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    READ_ONLY_MESSAGE,
    QueryResult,
    SQLError,
    check_size,
    fetch_rows,
)
from palaestra.verifiers.worker import WorkerError, WorkerPool, WorkerTimeout

KILL_GRACE_S = 0.5
"""How long past its time limit a query's worker is killed if DuckDB has not stopped."""
WORKER_MEMORY_MB = 1536
"""The worker process's address space (DuckDB reserves about 850 MB of it at start)."""
DUCKDB_MEMORY_LIMIT = "512MB"
LOADED_DATABASES = 16
LOAD_TIMEOUT_S = 120.0
CATALOG_TIMEOUT_S = 30.0
SCHEMA_PREFIX = "palaestra_db_"

_CATALOG_PREFIXES = ("duckdb_", "pragma_", "pg_", SCHEMA_PREFIX)
_DENIED_CALLS = frozenset(
    {"current_setting", "query", "query_table", "json_execute_serialized_sql", "getenv"}
)
_REFUSED = (
    "not allowed: catalog functions that show settings or paths (duckdb_*, pragma_*, pg_*, "
    "current_setting, query) are refused; query the tables instead"
)


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError as error:
        raise ImportError(
            "the DuckDB backend needs the duckdb package: pip install 'palaestra[duckdb]'"
        ) from error
    return duckdb


# -- the parent side -----------------------------------------------------------------------

_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def new_pool(workers: int = 1) -> WorkerPool:
    """A pool of DuckDB workers (each started on first use, stopped at exit)."""
    _import_duckdb()
    return WorkerPool(workers, preload=("duckdb", __name__), memory_mb=WORKER_MEMORY_MB)


def default_pool() -> WorkerPool:
    """The pool DuckDB databases share by default (one worker)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = new_pool()
        return _pool


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
        if not self.path.is_file():
            raise FileNotFoundError(f"no SQLite database at {self.path}")
        self.pool = pool or default_pool()
        self.kill_grace = kill_grace

    @classmethod
    def from_sqlite(cls, path: str | Path) -> DuckDBDatabase:
        return cls(path)

    def _call(self, function: Any, *args: Any, timeout: float) -> Any:
        return self.pool.call(function, (str(self.path), *args), timeout=timeout)

    def _loaded_call(self, function: Any, *args: Any, timeout: float) -> Any:
        """``function`` in the worker; when the worker answers that the database is not
        loaded (a new worker, or it was dropped), load it and call again."""
        reply = self._call(function, *args, timeout=timeout)
        if reply == UNLOADED:
            self._call(load_database, timeout=LOAD_TIMEOUT_S)
            reply = self._call(function, *args, timeout=timeout)
        return reply

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """Run one read-only query; raises :class:`SQLError` with the reason otherwise."""
        check_size(sql)
        try:
            reply = self._loaded_call(
                run_query, sql, max_rows, timeout, timeout=timeout + self.kill_grace
            )
        except WorkerTimeout:
            raise SQLError(f"the query ran past the time limit of {timeout:g} s") from None
        except WorkerError as error:
            raise SQLError(f"error: the query stopped its worker ({error})") from None
        if isinstance(reply, Refusal):
            raise SQLError(reply.message, syntax=reply.syntax)
        return reply

    def tables(self) -> list[str]:
        return self._loaded_call(read_catalog, "tables", timeout=CATALOG_TIMEOUT_S)

    def describe(self, table: str) -> str:
        """Columns of ``table`` (name, DuckDB type, NOT NULL)."""
        return self._loaded_call(read_catalog, "describe", table, timeout=CATALOG_TIMEOUT_S)

    def schema(self) -> str:
        """The ``CREATE TABLE`` statements in DuckDB's types, one per line."""
        return self._loaded_call(read_catalog, "schema", timeout=CATALOG_TIMEOUT_S)

    def close(self) -> None:
        """Nothing to free here: the worker keeps the most recently used databases."""


UNLOADED = "unloaded"
"""The worker's answer for a database it does not hold."""


@dataclass(frozen=True)
class Refusal:
    """Why a query did not run (sent back from the worker)."""

    message: str
    syntax: bool = False


# -- the worker side -------------------------------------------------------------------------


@dataclass
class _Loaded:
    version: tuple[int, int]
    schema: str
    cursor: Any


class _Store:
    """(In the worker) one in-memory DuckDB database; each SQLite file in its own schema."""

    def __init__(self) -> None:
        duckdb = _import_duckdb()
        self.connection = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "threads": 1,
                "memory_limit": DUCKDB_MEMORY_LIMIT,
                "temp_directory": "",
                "allow_persistent_secrets": False,
            },
        )
        self.connection.execute("SET lock_configuration = true")
        self.loaded: OrderedDict[str, _Loaded] = OrderedDict()
        self.count = 0
        self.watchdog = _Watchdog()

    def get(self, path: str) -> _Loaded | None:
        entry = self.loaded.get(path)
        if entry is None or entry.version != _version(path):
            return None
        self.loaded.move_to_end(path)
        return entry

    def load(self, path: str) -> None:
        if self.get(path) is not None:
            return
        self.count += 1
        schema = f"{SCHEMA_PREFIX}{self.count}"
        self.connection.execute(f"CREATE SCHEMA {schema}")
        _copy_tables(path, self.connection, schema)
        cursor = self.connection.cursor()
        cursor.execute(f"USE memory.{schema}")
        self.drop(path)
        self.loaded[path] = _Loaded(_version(path), schema, cursor)
        while len(self.loaded) > LOADED_DATABASES:
            self.drop(next(iter(self.loaded)))

    def drop(self, path: str) -> None:
        entry = self.loaded.pop(path, None)
        if entry is not None:
            entry.cursor.close()
            self.connection.execute(f"DROP SCHEMA {entry.schema} CASCADE")


_store: _Store | None = None


def _the_store() -> _Store:
    global _store
    if _store is None:
        _store = _Store()
    return _store


class _Watchdog:
    """One thread that interrupts the running query at its deadline. Arming wakes the
    thread only when it would otherwise sleep past the new deadline (a query is far
    shorter than its limit, so most arms cost no thread switch)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._cursor: Any = None
        self._deadline = 0.0
        self._wakes_at = float("inf")
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, cursor: Any, seconds: float) -> None:
        with self._cond:
            self._cursor, self._deadline = cursor, time.monotonic() + seconds
            if self._deadline < self._wakes_at:
                self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._cursor = None

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                if self._cursor is not None and now >= self._deadline:
                    self._cursor.interrupt()
                    self._cursor = None
                self._wakes_at = self._deadline if self._cursor is not None else float("inf")
                self._cond.wait(None if self._cursor is None else self._wakes_at - now)


def _version(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size


def _duckdb_type(declared: str) -> str:
    """A DuckDB column type for a SQLite declared type (SQLite's affinity rules)."""
    kind = declared.upper()
    if kind == "DATE":
        return "DATE"
    if kind in ("DATETIME", "TIMESTAMP"):
        return "TIMESTAMP"
    if "INT" in kind:
        return "BIGINT"
    if any(word in kind for word in ("CHAR", "CLOB", "TEXT")):
        return "VARCHAR"
    if "BLOB" in kind:
        return "BLOB"
    if any(word in kind for word in ("REAL", "FLOA", "DOUB")):
        return "DOUBLE"
    return "VARCHAR"


def _copy_tables(path: str, connection: Any, schema: str) -> None:
    """Every table of the SQLite file into ``schema``: each column goes in as one list
    parameter, unnested (no files: external access stays off). A table whose values do not
    fit its declared types is loaded as text."""
    duckdb = _import_duckdb()
    reader = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True)
    try:
        tables = reader.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
        ).fetchall()
        for (table,) in tables:
            info = reader.execute(f'PRAGMA table_info("{table}")').fetchall()
            rows = reader.execute(f'SELECT * FROM "{table}"').fetchall()
            columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in info]
            name = f'{schema}."{table}"'
            try:
                _insert(connection, name, info, [_duckdb_type(r[2]) for r in info], columns)
            except duckdb.Error:
                text = [[None if v is None else str(v) for v in column] for column in columns]
                _insert(connection, name, info, ["VARCHAR"] * len(info), text)
    finally:
        reader.close()


def _insert(
    connection: Any, table: str, info: list[Any], types: list[str], columns: list[list[Any]]
) -> None:
    definition = ", ".join(f'"{row[1]}" {kind}' for row, kind in zip(info, types, strict=True))
    connection.execute(f"CREATE OR REPLACE TABLE {table} ({definition})")
    if columns and columns[0]:
        values = ", ".join(f"unnest(${i + 1})::{kind}" for i, kind in enumerate(types))
        connection.execute(f"INSERT INTO {table} SELECT {values}", columns)


def load_database(path: str) -> None:
    """(In the worker) copy the SQLite file ``path`` into memory, if not done already."""
    _the_store().load(path)


def _refusal(cursor: Any, sql: str) -> Refusal | None:
    """Why ``sql`` may not run, or None."""
    duckdb = _import_duckdb()
    try:
        statements = cursor.extract_statements(sql)
    except duckdb.Error as error:
        return Refusal(f"syntax error: {error}", syntax=True)
    if len(statements) != 1:
        return Refusal(f"give exactly one SQL statement, got {len(statements)}", syntax=True)
    if statements[0].type != duckdb.StatementType.SELECT:
        return Refusal(READ_ONLY_MESSAGE)
    lowered = sql.lower()
    if not any(name in lowered for name in (*_CATALOG_PREFIXES, *_DENIED_CALLS)):
        return None  # no name that could be refused: skip tokenizing
    tokens = duckdb.tokenize(sql)
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    words = [
        sql[start:end].strip().strip('"').lower()
        for (start, _), end in zip(tokens, ends, strict=True)
    ]
    for index, word in enumerate(words):
        called = index + 1 < len(words) and words[index + 1].startswith("(")
        if word.startswith(_CATALOG_PREFIXES) or (called and word in _DENIED_CALLS):
            return Refusal(_REFUSED)
    return None


def run_query(path: str, sql: str, max_rows: int, timeout: float) -> QueryResult | Refusal | str:
    """(In the worker) run ``sql`` on the loaded database of ``path``: its result, a
    :class:`Refusal`, or :data:`UNLOADED`."""
    duckdb = _import_duckdb()
    store = _the_store()
    entry = store.get(path)
    if entry is None:
        return UNLOADED
    refusal = _refusal(entry.cursor, sql)
    if refusal is not None:
        return refusal
    store.watchdog.arm(entry.cursor, timeout)
    try:
        cursor = entry.cursor.execute(sql)
        rows, truncated = fetch_rows(cursor, max_rows)
        columns = [d[0] for d in cursor.description or ()]
    except duckdb.InterruptException:
        return Refusal(f"the query ran past the time limit of {timeout:g} s")
    except duckdb.OutOfMemoryException:
        return Refusal(f"error: the query needs more than {DUCKDB_MEMORY_LIMIT} of memory")
    except duckdb.ParserException as error:
        return Refusal(f"syntax error: {error}", syntax=True)
    except duckdb.PermissionException:
        return Refusal(READ_ONLY_MESSAGE)
    except SQLError as error:
        return Refusal(str(error))
    except (duckdb.Error, OverflowError, MemoryError, ValueError) as error:
        return Refusal(f"error: {error}")
    finally:
        store.watchdog.disarm()
    return QueryResult(columns, rows, truncated)


def read_catalog(path: str, request: str, *args: Any) -> Any:
    """(In the worker) ``tables``, ``describe`` (a table) or ``schema`` of a loaded
    database, or :data:`UNLOADED`."""
    entry = _the_store().get(path)
    if entry is None:
        return UNLOADED
    cursor = entry.cursor
    where = "schema_name = ?" + (" AND table_name = ?" if request == "describe" else "")
    params = [entry.schema, *args]
    if request == "tables":
        rows = cursor.execute(
            f"SELECT table_name FROM duckdb_tables() WHERE {where} ORDER BY table_name", params
        )
        return [row[0] for row in rows.fetchall()]
    if request == "describe":
        rows = cursor.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
            f"WHERE {where} ORDER BY column_index",
            params,
        ).fetchall()
        return "\n".join(
            f"{name} {kind}{'' if nullable else ' NOT NULL'}" for name, kind, nullable in rows
        )
    rows = cursor.execute(
        f"SELECT sql FROM duckdb_tables() WHERE {where} ORDER BY table_name", params
    ).fetchall()
    return "\n".join(" ".join(row[0].split()).replace(f"{entry.schema}.", "") for row in rows)
