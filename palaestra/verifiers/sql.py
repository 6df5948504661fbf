"""Execution-based SQL grading: run both queries on the database, compare the results.

>>> execution_match("SELECT name FROM t ORDER BY id", "SELECT name FROM t", db)  # doctest: +SKIP
1.0

Rules of :func:`execution_match` (the predicted query matches the gold one when):

* **rows** are compared as multisets (duplicates count, order ignored) unless the gold
  query's outermost statement has an ``ORDER BY``: then the order must match too;
* **columns** are compared by position; when that fails and both results have the same
  number of columns (at most :data:`MAX_PERMUTED_COLUMNS`), any order of the predicted
  columns is accepted (``SELECT b, a`` answers ``SELECT a, b``). Column names never matter;
* **values**: NULL equals NULL; numbers compare by value across int and float
  (``3 == 3.0``) with relative tolerance ``float_tolerance``; text and blobs exactly;
* **limits**: each query runs on a read-only connection (:func:`connect_readonly`) under a
  ``timeout`` and a ``max_rows`` cap; a predicted query that fails, times out or exceeds
  the cap scores 0. A gold query that fails raises :class:`SQLError` (a broken task is not
  a wrong answer).

Queries in another dialect are transpiled with ``sqlglot`` (``dialect="mysql"``,
``"postgres"``...), which also gives syntax errors a readable message. ``backend="duckdb"``
(extra ``duckdb``) runs the queries on DuckDB instead of SQLite
(:mod:`palaestra.verifiers.sql_duckdb`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_ROWS = 10_000
MAX_PERMUTED_COLUMNS = 6
MAX_SQL_CHARS = 20_000
MAX_VALUE_BYTES = 100_000
"""The largest string or blob a query may build."""
PROGRESS_OPCODES = 1_000
"""The progress handler runs every this many virtual-machine instructions."""

_ALLOWED_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}
)
_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "printf", "format"}
)
"""Extension loading, the shell's file functions, and printf/format: a single printf call
loops over its width (``printf('%.*c', 2147483647, 'x')`` runs for seconds) where neither
the progress handler nor an interrupt can stop it."""


_READ_STATEMENT = re.compile(
    r"(?is)^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(select|with|values|pragma)\b"
)
"""A statement that can only read (after leading whitespace and comments); the authorizer
and the read-only connection enforce it, this check says so early and clearly."""
READ_ONLY_MESSAGE = (
    "not allowed: the database is read-only (SELECT queries only; no writes, ATTACH, "
    "PRAGMA changes or extensions)"
)


class SQLError(Exception):
    """A query that could not run: the message says why, in words an agent can act on.
    ``syntax`` is whether it could not even be parsed (a malformed answer)."""

    def __init__(self, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.syntax = syntax


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Rows of a query (at most the row cap), its column names, and whether rows were cut."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


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


def check_size(sql: str) -> None:
    """Refuse an empty query or one over :data:`MAX_SQL_CHARS` characters."""
    if len(sql) > MAX_SQL_CHARS:
        raise SQLError(f"the query is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}")
    if not sql.strip():
        raise SQLError("the query is empty", syntax=True)


def _syntax_error(sql: str, sqlite_message: str) -> SQLError:
    """The error for a query SQLite could not parse: sqlglot's message names where."""
    try:
        to_sqlite(sql)
    except SQLError as error:
        return error
    return SQLError(f"syntax error: {sqlite_message}", syntax=True)


_SQLITE_SYNTAX = ("syntax error", "incomplete input", "unrecognized token")


def run_query(
    connection: sqlite3.Connection,
    sql: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> QueryResult:
    """Run one read-only SQLite query with a time limit (a progress handler interrupts it)
    and at most ``max_rows`` rows fetched; raises :class:`SQLError` with the reason
    otherwise. SQLite parses the query; sqlglot only words the message of a syntax error."""
    check_size(sql)
    if not _READ_STATEMENT.match(sql):
        to_sqlite(sql)  # a syntax error says so; a statement that parses is not a query
        raise SQLError(READ_ONLY_MESSAGE)
    deadline = _Deadline(time.perf_counter() + timeout)
    connection.set_progress_handler(deadline.expired, PROGRESS_OPCODES)
    try:
        cursor = connection.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
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
    return QueryResult(columns, rows[:max_rows], truncated=len(rows) > max_rows)


class SQLiteDatabase:
    """A read-only SQLite database (:func:`connect_readonly`); the DuckDB backend
    (:class:`~palaestra.verifiers.sql_duckdb.DuckDBDatabase`) has the same methods."""

    dialect = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.connection = connect_readonly(self.path)

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        return run_query(self.connection, sql, timeout=timeout, max_rows=max_rows)

    def tables(self) -> list[str]:
        rows = self.connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )
        return [row[0] for row in rows]

    def describe(self, table: str) -> str:
        """Columns (name, type, NOT NULL, PRIMARY KEY) and foreign keys of ``table``."""
        quoted = '"' + table.replace('"', '""') + '"'
        columns = self.connection.execute(f"PRAGMA table_info({quoted})").fetchall()
        keys = self.connection.execute(f"PRAGMA foreign_key_list({quoted})").fetchall()
        lines = [
            f"{name} {kind}{' NOT NULL' if notnull else ''}{' PRIMARY KEY' if pk else ''}"
            for _, name, kind, notnull, _, pk in columns
        ]
        return "\n".join(lines + [f"{row[3]} REFERENCES {row[2]}({row[4]})" for row in keys])

    def schema(self) -> str:
        """The ``CREATE TABLE`` statements, one per line."""
        rows = self.connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL ORDER BY rowid"
        )
        return "\n".join(" ".join(row[0].split()) + ";" for row in rows)

    def close(self) -> None:
        self.connection.close()


BACKENDS = ("sqlite", "duckdb")


def open_database(path: str | Path, backend: str = "sqlite") -> Any:
    """A read-only database of ``backend``: ``path`` is a SQLite file, for DuckDB too (its
    DuckDB copy is built once, :func:`~palaestra.verifiers.sql_duckdb.duckdb_copy`)."""
    if backend == "sqlite":
        return SQLiteDatabase(path)
    if backend == "duckdb":
        from palaestra.verifiers.sql_duckdb import DuckDBDatabase, duckdb_copy

        return DuckDBDatabase(duckdb_copy(path))
    raise ValueError(f"unknown SQL backend {backend!r}; choose one of {BACKENDS}")


@functools.lru_cache(maxsize=4096)
def transpile_gold(sql: str, dialect: str) -> str:
    """A SQLite gold query in ``dialect`` (cached: gold queries repeat)."""
    if dialect == "sqlite":
        return sql
    import sqlglot

    return sqlglot.transpile(sql, read="sqlite", write=dialect)[0]


@functools.lru_cache(maxsize=4096)
def orders_rows(sql: str) -> bool:
    """Whether the outermost statement of ``sql`` has an ORDER BY (its row order is part of
    the answer)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return False
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return tree.args.get("order") is not None


def _key(value: Any, digits: int) -> Any:
    """A hashable form of a cell under the tolerance: numbers by rounded value, else as is."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int | float):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return ("num", str(number))
        return ("num", float(f"{number:.{digits}g}"))
    return (type(value).__name__, value)


def _tolerance_digits(tolerance: float) -> int:
    return max(1, min(15, round(-math.log10(tolerance)))) if tolerance > 0 else 15


def results_match(
    predicted: Sequence[tuple[Any, ...]],
    gold: Sequence[tuple[Any, ...]],
    *,
    ordered: bool = False,
    float_tolerance: float = 1e-6,
) -> bool:
    """Whether two results are equal under the rules in the module docstring."""
    if len(predicted) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(row) != width for row in predicted):
        return False
    digits = _tolerance_digits(float_tolerance)
    gold_keys = [tuple(_key(v, digits) for v in row) for row in gold]
    orders = [tuple(range(width))]
    if width <= MAX_PERMUTED_COLUMNS:
        orders += [p for p in itertools.permutations(range(width)) if p != orders[0]]
    gold_target = gold_keys if ordered else Counter(gold_keys)
    for order in orders:
        keys = [tuple(_key(row[i], digits) for i in order) for row in predicted]
        if (keys if ordered else Counter(keys)) == gold_target:
            return True
    return False


def execution_match(
    predicted_sql: str,
    gold_sql: str,
    db_path: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_rows: int = DEFAULT_MAX_ROWS,
    float_tolerance: float = 1e-6,
    dialect: str | None = None,
    backend: str = "sqlite",
) -> float:
    """1.0 when ``predicted_sql`` returns the same result as ``gold_sql`` on ``db_path``
    (rules in the module docstring), else 0.0. Never raises for a bad predicted query.
    ``backend="duckdb"`` runs both on the DuckDB copy of the SQLite file ``db_path``; the
    gold query is SQLite's (transpiled), the predicted one DuckDB's (or ``dialect``'s)."""
    database = open_database(db_path, backend)
    try:
        target = database.dialect
        try:
            predicted = (
                predicted_sql
                if dialect in (None, target)
                else transpile(predicted_sql, dialect, target)
            )
        except SQLError:
            return 0.0
        gold = database.query(transpile_gold(gold_sql, target), timeout=timeout, max_rows=max_rows)
        if gold.truncated:
            raise SQLError(f"the gold query returns more than max_rows={max_rows} rows")
        try:
            result = database.query(predicted, timeout=timeout, max_rows=max_rows)
        except SQLError:
            return 0.0
    finally:
        database.close()
    if result.truncated:
        return 0.0
    ordered = orders_rows(gold_sql)
    matched = results_match(
        result.rows, gold.rows, ordered=ordered, float_tolerance=float_tolerance
    )
    return float(matched)
