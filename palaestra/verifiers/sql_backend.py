"""What every SQL backend shares: the protocol, the result, the error and the limits.

A backend is a class with the methods of :class:`Database` and a ``from_sqlite(path)``
constructor (a backend serves the tables of a SQLite file, the format the databases and
Spider/BIRD ship in). :data:`BACKENDS` names each class by import path, so the backend
modules (:mod:`palaestra.verifiers.sql`, :mod:`palaestra.verifiers.sql_duckdb`) never
import each other and :func:`open_database` loads only the one asked for.

Limits every backend holds for every query: at most ``max_rows`` rows and
:data:`MAX_RESULT_BYTES` bytes in total are fetched (:func:`fetch_rows`), a time limit,
a memory limit, and nothing but reading. Both backends run an agent's query in a killable
worker process (:func:`worker_query`), so the time limit holds even for one function call
the database engine cannot interrupt; a query asked again on the same file is answered
from :mod:`palaestra.verifiers.sql_results` without running.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from palaestra.verifiers.worker import WorkerPool

DEFAULT_TIMEOUT = 5.0
KILL_GRACE_S = 0.5
"""How long past its time limit a query's worker is killed if the engine has not stopped."""
DEFAULT_MAX_ROWS = 10_000
MAX_SQL_CHARS = 20_000
MAX_RESULT_BYTES = 8_000_000
"""The most bytes of values one result may hold (counted by :func:`value_bytes`, nested
values included); a bigger result is refused, however few rows it has."""
FIRST_CHUNK_ROWS = 16
"""Rows fetched before the width of a row is known (:func:`fetch_rows`)."""
READ_ONLY_MESSAGE = (
    "not allowed: the database is read-only (SELECT queries only; no writes, ATTACH, "
    "PRAGMA changes or extensions)"
)
BACKENDS = {
    "sqlite": "palaestra.verifiers.sql:SQLiteDatabase",
    "duckdb": "palaestra.verifiers.sql_duckdb:DuckDBDatabase",
}
"""Backend name -> ``module:Class`` of its :class:`Database` implementation."""


class SQLError(Exception):
    """A query that could not run: the message says why, in words an agent can act on.
    ``syntax`` is whether it could not even be parsed (a malformed answer)."""

    def __init__(self, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.syntax = syntax


@dataclass(frozen=True)
class Refusal:
    """Why a query did not run, as a worker process sends it back (plain data)."""

    message: str
    syntax: bool = False


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Rows of a query (at most the row cap), its column names, and whether rows were cut."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


@runtime_checkable
class Database(Protocol):
    """A read-only database that runs one query at a time under the limits above."""

    dialect: str
    """The SQL dialect its queries are written in (sqlglot's name)."""

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """Run one read-only query; raise :class:`SQLError` with the reason otherwise."""
        ...

    def submit(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> Callable[[], QueryResult]:
        """Start :meth:`query` where the backend can run it beside the caller (another
        process), else defer it; the function returned gives the result (call it once)."""
        ...

    def tables(self) -> list[str]:
        """Table names, sorted."""
        ...

    def describe(self, table: str) -> str:
        """One line per column of ``table`` (name, type, constraints)."""
        ...

    def schema(self) -> str:
        """The ``CREATE TABLE`` statements, one per line."""
        ...

    def close(self) -> None: ...


def open_database(sqlite_path: str | Path, backend: str = "sqlite") -> Database:
    """The tables of the SQLite file ``sqlite_path`` on ``backend``, read-only.

    >>> open_database("shop.sqlite", "duckdb")  # doctest: +SKIP
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown SQL backend {backend!r}; choose one of {sorted(BACKENDS)}")
    module, _, name = BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(module), name).from_sqlite(sqlite_path)


def worker_query(
    pool: WorkerPool,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    timeout: float,
    kill_grace: float = KILL_GRACE_S,
    follow_up: Callable[[Any], Any] | None = None,
    prefer: Hashable | None = None,
) -> Callable[[], QueryResult]:
    """Send the worker-side query ``function(*args)`` (it answers a :class:`QueryResult`
    or a :class:`Refusal`) to a worker of ``pool`` now (one that served ``prefer`` lately
    first: :meth:`~palaestra.verifiers.worker.WorkerPool.submit`); the function returned
    waits for the answer (call it once). The worker is killed ``kill_grace`` seconds past
    ``timeout``; a worker lost before it answered (killed from outside, say) is replaced
    and the query sent once more; every failure (time, a refusal, a worker that died again)
    is an :class:`SQLError`. ``follow_up`` may turn a reply into another (calls in the
    worker)."""
    from palaestra.verifiers.worker import WorkerError, WorkerLost, WorkerTimeout

    limit = timeout + kill_grace
    try:
        try:
            pending = pool.submit(function, args, timeout=limit, prefer=prefer)
        except OSError:  # a worker that died idle broke the pipe: it is dropped, try a new one
            pending = pool.submit(function, args, timeout=limit, prefer=prefer)
    except (WorkerError, OSError) as error:
        raise SQLError(f"error: the query stopped its worker ({error})") from None

    def result() -> QueryResult:
        try:
            try:
                reply = pending.result()
            except WorkerLost:  # it died before or while answering: once more, in a fresh one
                reply = pool.call(function, args, timeout=limit, prefer=prefer)
            if follow_up is not None:
                reply = follow_up(reply)
        except WorkerTimeout:
            raise SQLError(f"the query ran past the time limit of {timeout:g} s") from None
        except (WorkerError, OSError) as error:
            raise SQLError(f"error: the query stopped its worker ({error})") from None
        if isinstance(reply, Refusal):
            raise SQLError(reply.message, syntax=reply.syntax)
        return reply

    return result


def check_size(sql: str) -> None:
    """Refuse an empty query or one over :data:`MAX_SQL_CHARS` characters."""
    if len(sql) > MAX_SQL_CHARS:
        raise SQLError(f"the query is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}")
    if not sql.strip():
        raise SQLError("the query is empty", syntax=True)


def transpile(sql: str, read: str, write: str) -> str:
    """``sql`` of dialect ``read`` as dialect ``write`` (unchanged when they are the same),
    checked by sqlglot: :class:`SQLError` for a syntax error or several statements."""
    import sqlglot
    from sqlglot.errors import ParseError, SqlglotError

    check_size(sql)
    try:
        statements = [s for s in sqlglot.parse(sql, read=read) if s is not None]
    except ParseError as error:
        details = error.errors[0] if error.errors else {}
        where = (
            f" near {details['highlight']!r} (line {details['line']}, column {details['col']})"
            if details.get("highlight")
            else ""
        )
        message = f"syntax error{where}: {details.get('description') or error}"
        raise SQLError(message, syntax=True) from None
    except (SqlglotError, RecursionError) as error:
        message = f"syntax error: {str(error)[:200] or type(error).__name__}"
        raise SQLError(message, syntax=True) from None
    if len(statements) != 1:
        raise SQLError(f"give exactly one SQL statement, got {len(statements)}", syntax=True)
    if read == write:
        return sql.strip().rstrip(";")
    return statements[0].sql(dialect=write)


def value_bytes(value: Any) -> int:
    """What a value counts toward :data:`MAX_RESULT_BYTES`: text and blobs by length, a
    list or struct (DuckDB) by what it holds, anything else 8 bytes.

    >>> value_bytes(["ab", {"k": b"xyz"}])
    6
    """
    if isinstance(value, str | bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(value_bytes(item) for item in value)
    if isinstance(value, dict):
        return sum(len(str(key)) + value_bytes(item) for key, item in value.items())
    return 8


def row_bytes(row: tuple[Any, ...]) -> int:
    """The sum of :func:`value_bytes` over a row, with the common types counted inline."""
    width = 0
    for value in row:
        kind = type(value)
        if kind is str or kind is bytes:
            width += len(value)
        elif kind is int or kind is float or value is None:
            width += 8
        else:
            width += value_bytes(value)
    return width


def fetch_rows(
    cursor: Any, max_rows: int, max_bytes: int = MAX_RESULT_BYTES
) -> tuple[list[tuple[Any, ...]], bool]:
    """At most ``max_rows`` rows of a DB-API ``cursor`` (and whether more were left);
    :class:`SQLError` once the rows hold more than ``max_bytes`` bytes.

    Rows come in chunks sized by the largest row so far, so at most about one chunk's worth
    is fetched past the cap however wide the rows are."""
    rows: list[tuple[Any, ...]] = []
    size = widest = 0
    while len(rows) <= max_rows:
        room = max(1, (max_bytes - size) // widest) if widest else FIRST_CHUNK_ROWS
        chunk = cursor.fetchmany(min(room, 1024, max_rows + 1 - len(rows)))
        if not chunk:
            break
        for row in chunk:
            width = row_bytes(row)
            widest = max(widest, width)
            size += width
        if size > max_bytes:
            raise SQLError(
                f"the result holds over {max_bytes:,} bytes; select fewer or shorter values"
            )
        rows.extend(tuple(row) for row in chunk)
    return rows[:max_rows], len(rows) > max_rows
