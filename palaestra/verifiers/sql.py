"""Execution-based SQL grading on SQLite: run the gold and the predicted query, compare.

>>> execution_match("SELECT name FROM t ORDER BY id", "SELECT name FROM t", db)  # doctest: +SKIP
1.0

:func:`execution_match` scores 1 when the predicted query returns the gold query's result
under the rules of :mod:`palaestra.verifiers.sql_compare` (exact integers, float
tolerance, any column order, rows as a multiset unless the gold orders them, tied rows
in any order). The gold query always runs on the SQLite file, whatever backend runs the
predicted one (``backend="duckdb"``: :mod:`palaestra.verifiers.sql_duckdb`), so a
dialect never changes what the right answer is.

The SQLite backend (:class:`SQLiteDatabase`): each query runs on a read-only connection
(:func:`connect_readonly`) with an authorizer that allows reading only, under a time
limit, a cap on any one value (:data:`MAX_VALUE_BYTES`), and caps on the rows and total
bytes fetched (:func:`~palaestra.verifiers.sql_backend.fetch_rows`). An agent's query runs
in a worker process (:func:`default_pool`): a progress handler stops it between
virtual-machine steps, and the worker is killed
:data:`~palaestra.verifiers.sql_backend.KILL_GRACE_S` past the limit when one step does
not end (``trim(X, Y)`` over long strings is a single step of seconds). Gold queries,
which the task wrote, run in this process (:meth:`SQLiteDatabase.query_trusted`).
A predicted query that fails, runs out of time or exceeds a cap scores 0; a gold query
that fails raises :class:`SQLError` (a broken task is not a wrong answer).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palaestra.core.shared import process_wide
from palaestra.verifiers.sql_backend import (
    BACKENDS,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    KILL_GRACE_S,
    MAX_SQL_CHARS,
    READ_ONLY_MESSAGE,
    Database,
    QueryResult,
    Refusal,
    SQLError,
    check_size,
    fetch_rows,
    open_database,
    transpile,
    worker_query,
)
from palaestra.verifiers.sql_compare import (
    DEFAULT_FLOAT_TOLERANCE,
    has_limit,
    keyed_query,
    orders_rows,
    results_match,
    tie_blocks,
)
from palaestra.verifiers.sql_files import (
    HOLD_TRIES,
    FileHold,
    add_rebuilder,
    delete_unless_held,
    file_version,
    file_version_or_none,
    hold_file,
    rebuild,
)
from palaestra.verifiers.sql_results import results
from palaestra.verifiers.worker import WorkerPool

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT",
    "HOLD_TRIES",
    "DatabaseLease",
    "FileHold",
    "Gold",
    "GoldCache",
    "QueryResult",
    "SQLError",
    "SQLiteDatabase",
    "SharedDatabases",
    "add_rebuilder",
    "answer_matches",
    "connect_readonly",
    "default_golds",
    "default_pool",
    "delete_unless_held",
    "execution_match",
    "hold_file",
    "lease_database",
    "open_database",
    "rebuild",
    "run_query",
    "to_sqlite",
]

MAX_VALUE_BYTES = 100_000
"""The largest string or blob a query may build."""
PROGRESS_OPCODES = 1_000
"""The progress handler runs every this many virtual-machine instructions."""
WORKER_MEMORY_MB = 1024
"""A SQLite worker process's address space."""
WORKER_CONNECTIONS = 16
"""Connections a worker keeps open (the most recently used files)."""

_ALLOWED_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}
)
_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "printf", "format", "fts3_tokenizer"}
)
"""Extension loading, the shell's file functions, ``fts3_tokenizer`` (it returns a
library pointer and registers tokenizers on the connection), and printf/format: a single
printf call loops over its width (``printf('%.*c', 2147483647, 'x')`` runs for seconds)
where neither the progress handler nor an interrupt can stop it."""

_READ_STATEMENT = re.compile(
    r"(?is)^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(select|with|values|pragma)\b"
)
"""A statement that can only read (after leading whitespace and comments); the authorizer
and the read-only connection enforce it, this check says so early and clearly."""
_SQLITE_SYNTAX = ("syntax error", "incomplete input", "unrecognized token")


@dataclass(slots=True)
class _Deadline:
    at: float = field(default=0.0)

    def expired(self) -> int:
        return 1 if time.perf_counter() > self.at else 0


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    """Allow reading only: SELECT, reads of columns, functions (not those in
    :data:`_DENIED_FUNCTIONS`), recursive CTEs and a few schema pragmas; everything else is
    denied."""
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return (
            sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
        )
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _ALLOWED_PRAGMAS:
        return sqlite3.SQLITE_OK  # schema lookups only: table_info(t) and the like
    return sqlite3.SQLITE_DENY


def connect_readonly(db_path: str | Path) -> sqlite3.Connection:
    """A connection that can only read ``db_path``: opened ``mode=ro`` (the file cannot be
    written whatever the query), with an authorizer that refuses writes, ``ATTACH``, schema
    changes, extension loading and pragmas other than schema lookups."""
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"no SQLite database at {path}")
    connection = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
    )
    connection.set_authorizer(_authorize)
    # one oversized value (printf('%.*c', 2147483647, 'x'), zeroblob) is a single VM step
    # the progress handler cannot interrupt: cap the size of any string or blob instead
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 4 * MAX_SQL_CHARS)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000)
    return connection


def to_sqlite(sql: str, dialect: str | None = None) -> str:
    """``sql`` parsed (and transpiled from ``dialect``) with sqlglot; raises :class:`SQLError`
    with a readable message for a syntax error or for more than one statement."""
    return transpile(sql, dialect or "sqlite", "sqlite")


def _syntax_error(sql: str, sqlite_message: str) -> SQLError:
    """The error for a query SQLite could not parse: sqlglot's message names where."""
    try:
        to_sqlite(sql)
    except SQLError as error:
        return error
    return SQLError(f"syntax error: {sqlite_message}", syntax=True)


def run_query(
    connection: sqlite3.Connection,
    sql: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> QueryResult:
    """Run one read-only SQLite query in this process with a time limit (a progress handler
    interrupts it between virtual-machine steps, not inside one: for untrusted SQL use
    :class:`SQLiteDatabase`, which runs it in a killable worker) and at most ``max_rows``
    rows and :data:`~palaestra.verifiers.sql_backend.MAX_RESULT_BYTES` fetched; raises
    :class:`SQLError` with the reason otherwise. SQLite parses the query; sqlglot only
    words the message of a syntax error."""
    check_size(sql)
    if not _READ_STATEMENT.match(sql):
        to_sqlite(sql)  # a syntax error says so; a statement that parses is not a query
        raise SQLError(READ_ONLY_MESSAGE)
    deadline = _Deadline(time.perf_counter() + timeout)
    connection.set_progress_handler(deadline.expired, PROGRESS_OPCODES)
    try:
        cursor = connection.execute(sql)
        rows, truncated = fetch_rows(cursor, max_rows)
    except sqlite3.OperationalError as error:
        if str(error) == "interrupted":
            raise SQLError(f"the query ran past the time limit of {timeout:g} s") from None
        if "not authorized" in str(error):
            raise SQLError(READ_ONLY_MESSAGE) from None
        if any(marker in str(error) for marker in _SQLITE_SYNTAX):
            raise _syntax_error(sql, str(error)) from None
        raise SQLError(f"error: {error}") from None
    except sqlite3.ProgrammingError as error:
        if "one statement at a time" in str(error):
            raise SQLError("give exactly one SQL statement", syntax=True) from None
        raise SQLError(f"error: {error}") from None
    except (sqlite3.Error, OverflowError, MemoryError, ValueError, RecursionError) as error:
        raise SQLError(f"error: {error}") from None
    finally:
        connection.set_progress_handler(None, 0)
    columns = [d[0] for d in cursor.description or ()]
    return QueryResult(columns, rows, truncated=truncated)


@process_wide
def default_pool() -> WorkerPool:
    """The worker processes SQLite databases share by default (started on first use)."""
    return WorkerPool(preload=("palaestra.verifiers.sql",), memory_mb=WORKER_MEMORY_MB)


_worker_connections: OrderedDict[str, tuple[tuple[int, int, int], sqlite3.Connection]] = (
    OrderedDict()
)


def _worker_connection(path: str) -> sqlite3.Connection:
    """(In a worker) a read-only connection to ``path``, reopened when the file changed."""
    version = file_version(Path(path))
    entry = _worker_connections.pop(path, None)
    if entry is not None and entry[0] != version:
        entry[1].close()
        entry = None
    entry = entry or (version, connect_readonly(path))
    _worker_connections[path] = entry
    while len(_worker_connections) > WORKER_CONNECTIONS:
        _worker_connections.popitem(last=False)[1][1].close()
    return entry[1]


MISSING = "missing"
"""A worker's answer when the database file is not there (the parent builds it again)."""


def query_in_worker(
    path: str, sql: str, max_rows: int, timeout: float
) -> QueryResult | Refusal | str:
    """(In a worker) :func:`run_query` on ``path``: its result, a :class:`Refusal`, or
    :data:`MISSING`."""
    try:
        connection = _worker_connection(path)
    except FileNotFoundError:
        _worker_connections.pop(path, None)
        return MISSING
    except OSError as error:
        return Refusal(f"error: cannot open the database: {error}")
    try:
        return run_query(connection, sql, timeout=timeout, max_rows=max_rows)
    except SQLError as error:
        return Refusal(str(error), error.syntax)


class SQLiteDatabase:
    """A read-only SQLite database (:func:`connect_readonly`); implements
    :class:`~palaestra.verifiers.sql_backend.Database`. :meth:`query` runs in a worker of
    ``pool`` (default: :func:`default_pool`), killed ``kill_grace`` seconds past the time
    limit; :meth:`query_trusted` and the catalog methods run in this process, one at a time
    (under :attr:`lock`: a query's time limit is a progress handler on the connection, so
    two threads on it at once would share one deadline); :meth:`locked` lends the
    connection under the same lock. One database may serve many envs on many threads
    (:func:`lease_database`)."""

    dialect = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        pool: WorkerPool | None = None,
        kill_grace: float = KILL_GRACE_S,
    ) -> None:
        self.path = Path(path).resolve()
        try:  # held first: a cache never deletes a file in use; built again if it went
            self._hold = FileHold(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(f"no SQLite database at {self.path}") from None
        self.connection = connect_readonly(self.path)
        self.lock = threading.Lock()
        self.version = file_version(self.path)
        self._pool = pool
        self.kill_grace = kill_grace

    @classmethod
    def from_sqlite(cls, path: str | Path) -> SQLiteDatabase:
        return cls(path)

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """Run one read-only query (an agent's) in a worker process; :class:`SQLError`
        with the reason otherwise."""
        return self.submit(sql, timeout=timeout, max_rows=max_rows)()

    def submit(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> Callable[[], QueryResult]:
        """Send the query to a worker now (unless it ran before:
        :mod:`~palaestra.verifiers.sql_results`); the function returned
        waits for its result (call it exactly once: it hands the worker back)."""
        check_size(sql)
        pool = self._pool or default_pool()
        args = (str(self.path), sql, max_rows, timeout)

        def build_if_missing(reply: Any) -> Any:
            if reply != MISSING:
                return reply
            self._hold.renew()  # deleted though held (by hand, or from another machine)
            reply = pool.call(
                query_in_worker, args, timeout=timeout + self.kill_grace, prefer=args[0]
            )
            return Refusal("error: the database file is missing") if reply == MISSING else reply

        return results.submit(
            results.key(self.dialect, self.path, sql),
            max_rows,
            timeout,
            lambda: worker_query(
                pool,
                query_in_worker,
                args,
                timeout=timeout,
                kill_grace=self.kill_grace,
                follow_up=build_if_missing,
                prefer=args[0],  # a worker keeps the file's connection open
            ),
        )

    def query_trusted(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """:func:`run_query` in this process, for SQL the task wrote (a gold query): no
        process round trip, and a time limit that holds between virtual-machine steps."""
        with self.lock:
            return run_query(self.connection, sql, timeout=timeout, max_rows=max_rows)

    @contextlib.contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, for this thread alone while the ``with`` block runs."""
        with self.lock:
            yield self.connection

    def tables(self) -> list[str]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        return [row[0] for row in rows]

    def describe(self, table: str) -> str:
        """Columns (name, type, NOT NULL, PRIMARY KEY) and foreign keys of ``table``."""
        quoted = '"' + table.replace('"', '""') + '"'
        with self.lock:
            columns = self.connection.execute(f"PRAGMA table_info({quoted})").fetchall()
            keys = self.connection.execute(f"PRAGMA foreign_key_list({quoted})").fetchall()
        lines = [
            f"{name} {kind}{' NOT NULL' if notnull else ''}{' PRIMARY KEY' if pk else ''}"
            for _, name, kind, notnull, _, pk in columns
        ]
        return "\n".join(lines + [f"{row[3]} REFERENCES {row[2]}({row[4]})" for row in keys])

    def schema(self) -> str:
        """The ``CREATE TABLE`` statements, one per line."""
        with self.lock:
            rows = self.connection.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
                "ORDER BY rowid"
            ).fetchall()
        return "\n".join(" ".join(row[0].split()) + ";" for row in rows)

    def close(self) -> None:
        self.connection.close()
        self._hold.close()


class SharedDatabases:
    """One open :class:`SQLiteDatabase` per file for every user in the process (envs on
    many threads, :func:`execution_match`): each is about 0.3 MB of SQLite's memory, so one
    per env per file cost megabytes per env. :meth:`lease` hands one out; a database some
    lease uses is never closed (so its file stays held), and past :attr:`capacity` open
    files those no lease uses are closed, least recently released first. A file whose
    version changed is opened again (the old database closes with its last lease)."""

    capacity = 256
    """Open files past which those no lease uses are closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Path, SQLiteDatabase] = {}
        self._leases: dict[int, int] = {}  # id(database) -> leases open
        self._idle: OrderedDict[Path, None] = OrderedDict()  # open, no lease, oldest first
        self._retired: set[int] = set()  # replaced by a newer version, closed when unused

    def lease(self, path: str | Path) -> DatabaseLease:
        """The shared database at ``path`` (opened, or built again, if needed), kept open
        until the lease returned is closed."""
        path = Path(path).resolve()
        with self._lock:
            database = self._open.get(path)
            if database is not None and database.version != file_version_or_none(path):
                del self._open[path]
                self._idle.pop(path, None)
                self._retire(database)
                database = None
            if database is None:
                database = self._open[path] = SQLiteDatabase(path)
            self._leases[id(database)] = self._leases.get(id(database), 0) + 1
            self._idle.pop(path, None)
        return DatabaseLease(self, database)

    def release(self, database: SQLiteDatabase) -> None:
        with self._lock:
            left = self._leases[id(database)] = self._leases[id(database)] - 1
            if left:
                return
            del self._leases[id(database)]
            if id(database) in self._retired:
                self._retired.discard(id(database))
                database.close()
                return
            self._idle[database.path] = None
            while len(self._open) > self.capacity and self._idle:
                self._open.pop(self._idle.popitem(last=False)[0]).close()

    def _retire(self, database: SQLiteDatabase) -> None:
        if self._leases.get(id(database)):
            self._retired.add(id(database))
        else:
            self._leases.pop(id(database), None)
            database.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)


class DatabaseLease:
    """A use of a shared database (:meth:`SharedDatabases.lease`): :attr:`database` stays
    open, and its file held, until :meth:`close` (or collection)."""

    def __init__(self, databases: SharedDatabases, database: SQLiteDatabase) -> None:
        self.database = database
        self.close = weakref.finalize(self, databases.release, database)


@process_wide
def shared_databases() -> SharedDatabases:
    """The process's :class:`SharedDatabases`."""
    return SharedDatabases()


def lease_database(path: str | Path) -> DatabaseLease:
    """The process's one open SQLite database at ``path``, used until the lease is closed
    (:class:`SharedDatabases`)."""
    return shared_databases().lease(path)


@dataclass
class Gold:
    """A gold query's result on its SQLite database (:meth:`run`), and how rows are ordered."""

    sql: str
    rows: list[tuple[Any, ...]]
    ordered: bool
    path: Path
    """The SQLite file it ran on (read again for :meth:`tie_blocks`)."""
    timeout: float = DEFAULT_TIMEOUT
    _blocks: list[int] | None = field(default=None, repr=False)

    @classmethod
    def run(
        cls,
        database: SQLiteDatabase,
        sql: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> Gold:
        """Run ``sql`` on ``database``; :class:`SQLError` if it fails or is cut at ``max_rows``."""
        result = database.query_trusted(sql, timeout=timeout, max_rows=max_rows)
        if result.truncated:
            raise SQLError(f"the gold query returns more than max_rows={max_rows} rows")
        return cls(sql, result.rows, orders_rows(sql), database.path, timeout)

    def tie_blocks(self) -> list[int] | None:
        """Sizes of the runs of consecutive rows the gold's ORDER BY keys tie on (run once,
        with the keys as extra columns); None when they cannot be read, so order is strict."""
        if self._blocks is None:
            self._blocks = self._read_tie_blocks() or [1] * len(self.rows)
        return self._blocks

    def _read_tie_blocks(self) -> list[int] | None:
        keyed = keyed_query(self.sql)
        if keyed is None:
            return None
        try:  # the file's shared database now (the one the gold ran on may be closed)
            lease = lease_database(self.path)
        except FileNotFoundError:
            return None
        try:
            result = lease.database.query_trusted(
                keyed.sql, timeout=self.timeout, max_rows=len(self.rows)
            )
        except SQLError:
            return None
        finally:
            lease.close()
        columns, keys = keyed.split(result.rows)
        if result.truncated or columns != [tuple(row) for row in self.rows]:
            return None  # the extra columns changed the rows (DISTINCT): keep the order strict
        return tie_blocks(keys)


def answer_matches(
    result: QueryResult, gold: Gold, float_tolerance: float = DEFAULT_FLOAT_TOLERANCE
) -> bool:
    """Whether a predicted result is the gold's answer (a truncated one never is)."""
    if result.truncated:
        return False
    if results_match(result.rows, gold.rows, ordered=gold.ordered, float_tolerance=float_tolerance):
        return True
    if not gold.ordered or not results_match(
        result.rows, gold.rows, float_tolerance=float_tolerance
    ):
        return False
    blocks = gold.tie_blocks()
    return results_match(
        result.rows, gold.rows, ordered=True, float_tolerance=float_tolerance, tie_blocks=blocks
    )


def execution_match(
    predicted_sql: str,
    gold_sql: str,
    db_path: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_rows: int = DEFAULT_MAX_ROWS,
    float_tolerance: float = DEFAULT_FLOAT_TOLERANCE,
    dialect: str | None = None,
    backend: str = "sqlite",
    suite: Sequence[str | Path] = (),
) -> float:
    """1.0 when ``predicted_sql`` returns the same result as ``gold_sql`` on the SQLite file
    ``db_path`` (rules in the module docstring), and on every file of ``suite``, else 0.0.
    Never raises for a bad predicted query. The gold query is SQLite's and runs on SQLite;
    the predicted one runs on ``backend`` in its dialect (or is transpiled from
    ``dialect``); on another backend, at the same time as the gold.

    ``suite``: more databases of the same schema (test-suite grading, Zhong et al. 2020;
    for generated domains, :func:`palaestra.envs.sql.suite.grading_suite`: databases of
    other seeds and copies of ``db_path`` fuzzed toward the gold's witnesses): a query that
    is right only on ``db_path``'s data (a missing DISTINCT where no names repeat) scores
    0. The gold's results there are cached (:class:`GoldCache`); a gold that keeps some
    rows (LIMIT) is judged on ``db_path`` only, since rows may tie at the cut elsewhere.
    """
    paths = [Path(db_path), *(() if has_limit(gold_sql) else map(Path, suite))]
    leases: list[DatabaseLease] = []  # held for the whole check: no thread closes them meanwhile
    databases: list[Database] = []
    try:
        for path in paths:
            if backend == "sqlite":
                leases.append(lease_database(path))
                databases.append(leases[-1].database)
            else:
                databases.append(open_database(path, backend))
        for index, path in enumerate(paths):
            database = databases[index]
            gold = functools.partial(
                default_golds().gold, path, gold_sql, timeout=timeout, max_rows=max_rows
            )
            predicted = _submit_predicted(database, predicted_sql, dialect, timeout, max_rows)
            try:
                expected = gold()
            finally:
                result = predicted()
            if result is None or not answer_matches(result, expected, float_tolerance):
                return 0.0
        return 1.0
    finally:
        for lease in leases:
            lease.close()
        if backend != "sqlite":
            for database in databases:
                database.close()


class GoldCache:
    """Gold results by (database file, its version, query, row cap), the most recently used
    kept: the suite's databases answer every check, so their golds run once per question.
    The files stay open in the process's :class:`SharedDatabases`."""

    capacity = 256
    """Gold results kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._golds: OrderedDict[tuple[Any, ...], Gold] = OrderedDict()

    def gold(self, path: Path, sql: str, *, timeout: float, max_rows: int) -> Gold:
        """The gold result of ``sql`` on ``path``, run once per version of the file."""
        lease = lease_database(path)
        try:
            database = lease.database
            key = (database.path, database.version, sql, max_rows)
            with self._lock:
                if key in self._golds:
                    self._golds.move_to_end(key)
                    return self._golds[key]
            gold = Gold.run(database, sql, timeout=timeout, max_rows=max_rows)
        finally:
            lease.close()
        with self._lock:
            self._golds[key] = gold
            while len(self._golds) > self.capacity:
                self._golds.popitem(last=False)
        return gold


@process_wide
def default_golds() -> GoldCache:
    """The :class:`GoldCache` :func:`execution_match` shares."""
    return GoldCache()


def _submit_predicted(
    database: Database, sql: str, dialect: str | None, timeout: float, max_rows: int
) -> Callable[[], QueryResult | None]:
    """Start the predicted query on ``database`` (:meth:`Database.submit`); the function
    returned gives its result, or None if it cannot run."""
    try:
        if dialect not in (None, database.dialect):
            sql = transpile(sql, dialect, database.dialect)
        pending = database.submit(sql, timeout=timeout, max_rows=max_rows)
    except SQLError:
        return lambda: None

    def result() -> QueryResult | None:
        try:
            return pending()
        except SQLError:
            return None

    return result
