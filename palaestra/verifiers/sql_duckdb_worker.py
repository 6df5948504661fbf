"""The worker-process side of the DuckDB backend (:mod:`palaestra.verifiers.sql_duckdb`).

One in-memory DuckDB database per worker process, opened with external access off and its
configuration locked; each SQLite file it serves is copied into a schema of its own the first
time a query needs it (the :data:`LOADED_DATABASES` most recently used are kept). The
functions here run in the worker: :func:`load_database`, :func:`run_query` and
:func:`read_catalog`; they answer with plain data (a result, a :class:`Refusal`, or
:data:`UNLOADED`).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.verifiers.sql_backend import (
    READ_ONLY_MESSAGE,
    QueryResult,
    Refusal,
    SQLError,
    fetch_rows,
)
from palaestra.verifiers.sql_files import file_version

DUCKDB_MEMORY_LIMIT = "512MB"
LOADED_DATABASES = 32
SCHEMA_PREFIX = "palaestra_db_"

_CATALOG_PREFIXES = ("duckdb_", "pragma_", "pg_", SCHEMA_PREFIX)
_DENIED_CALLS = frozenset(
    {"current_setting", "query", "query_table", "json_execute_serialized_sql", "getenv"}
)
_SUSPECT_NAMES = (*_CATALOG_PREFIXES, *_DENIED_CALLS, "system", "temp")
"""Text a refused call or another schema's table cannot be written without: a query with
none of it skips the parse-tree check."""
_REFUSED = (
    "not allowed: catalog functions that show settings or paths (duckdb_*, pragma_*, pg_*, "
    "current_setting, query, query_table) and tables outside this database are refused; "
    "query its tables instead"
)


def import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError as error:
        raise ImportError(
            "the DuckDB backend needs the duckdb package: pip install 'palaestra[duckdb]'"
        ) from error
    return duckdb


UNLOADED = "unloaded"
"""The worker's answer for a database it does not hold."""


@dataclass
class _Loaded:
    version: tuple[int, int, int]
    schema: str
    cursor: Any


class _Store:
    """(In the worker) one in-memory DuckDB database; each SQLite file in its own schema."""

    def __init__(self) -> None:
        duckdb = import_duckdb()
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
        try:
            current = file_version(path)
        except OSError:  # deleted: the parent builds it again before it loads it
            current = None
        if entry is None or entry.version != current:
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
        self.loaded[path] = _Loaded(file_version(path), schema, cursor)
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


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{6})?")
_FITS = {
    "BIGINT": lambda v: isinstance(v, int) and -(2**63) <= v < 2**63,
    "DOUBLE": lambda v: isinstance(v, float) or (isinstance(v, int) and abs(v) <= 2**53),
    "VARCHAR": lambda v: isinstance(v, str),
    "BLOB": lambda v: isinstance(v, bytes),
    "DATE": lambda v: isinstance(v, str) and _ISO_DATE.fullmatch(v) is not None,
    "TIMESTAMP": lambda v: isinstance(v, str) and _ISO_TIMESTAMP.fullmatch(v) is not None,
}
"""Whether a value SQLite returns goes into a DuckDB type and comes back the same (after
:func:`~palaestra.verifiers.sql_compare.normalize`: a DATE as ``YYYY-MM-DD``, a TIMESTAMP
as ``YYYY-MM-DD HH:MM:SS``)."""


def column_type(declared: str, values: list[Any]) -> str:
    """The DuckDB type of a column: its declared type's when every value fits it
    (:data:`_FITS`), else the first of BIGINT, DOUBLE, BLOB that every value fits, else
    VARCHAR (values kept as their text). Decided per column, so one odd value
    (``'unknown'`` in a DATE column) changes only its own column.

    >>> column_type("DATE", ["2024-01-02", None, "unknown"]), column_type("TEXT", [1, 2.5])
    ('VARCHAR', 'DOUBLE')
    """
    kinds = set(map(type, values)) - {type(None)}
    fits = _fits_by_type if kinds <= _SQLITE_TYPES else _fits_each
    for kind in (_duckdb_type(declared), "BIGINT", "DOUBLE", "BLOB", "VARCHAR"):
        if fits(kind, values, kinds):
            return kind
    return "VARCHAR"


_SQLITE_TYPES = frozenset({int, float, str, bytes})
"""The Python types of the values SQLite returns (besides None)."""


def _fits_each(kind: str, values: list[Any], kinds: set[type]) -> bool:
    """Whether every value but NULL fits ``kind``, asked of each value (:data:`_FITS`)."""
    return all(_FITS[kind](value) for value in values if value is not None)


def _fits_by_type(kind: str, values: list[Any], kinds: set[type]) -> bool:
    """:func:`_fits_each` for values of :data:`_SQLITE_TYPES` only, decided from the set of
    their types and the range of the integers (per value only for dates and times)."""
    if kind in ("VARCHAR", "BLOB"):
        return kinds <= {str if kind == "VARCHAR" else bytes}
    if kind in ("DATE", "TIMESTAMP"):
        return kinds <= {str} and _fits_each(kind, values, kinds)
    if not kinds <= ({int} if kind == "BIGINT" else {int, float}):
        return False
    if int not in kinds:
        return True
    integers = [value for value in values if type(value) is int]
    low, high = min(integers), max(integers)
    if kind == "BIGINT":
        return -(2**63) <= low <= high < 2**63
    return -(2**53) <= low <= high <= 2**53


def _as_loaded(kind: str, values: list[Any]) -> list[Any]:
    """A column's values as parameters for ``kind`` (numbers as floats for DOUBLE, anything
    as its text for VARCHAR, which a mixed column falls back to)."""
    if kind == "DOUBLE":
        return [None if v is None else float(v) for v in values]
    if kind == "VARCHAR" and not all(isinstance(v, str | None) for v in values):
        return [v if v is None or isinstance(v, str) else _text(v) for v in values]
    return values


def _text(value: Any) -> str:
    """A value as SQLite's ``CAST(value AS TEXT)`` writes it."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value) if isinstance(value, float) else str(value)


def _copy_tables(path: str, connection: Any, schema: str) -> None:
    """Every table of the SQLite file into ``schema``, typed by :func:`column_type`: the
    columns go in as NumPy arrays, scanned by DuckDB (no files: external access stays
    off)."""
    reader = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True)
    try:
        tables = reader.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
        ).fetchall()
        for (table,) in tables:
            info = reader.execute(f'PRAGMA table_info("{table}")').fetchall()
            rows = reader.execute(f'SELECT * FROM "{table}"').fetchall()
            columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in info]
            types = [column_type(r[2], c) for r, c in zip(info, columns, strict=True)]
            loaded = [_as_loaded(k, c) for k, c in zip(types, columns, strict=True)]
            _insert(connection, f'{schema}."{table}"', info, types, loaded)
    finally:
        reader.close()


_LOAD_VIEW = "palaestra_load"
"""The name a table's columns are registered under while they are copied in."""
_NUMPY_TYPES = {"BIGINT": "int64", "DOUBLE": "float64"}


def _insert(
    connection: Any, table: str, info: list[Any], types: list[str], columns: list[list[Any]]
) -> None:
    """Create ``table`` and copy ``columns`` into it. Numbers go in as typed arrays beside
    a NULL mask (exact: no type is guessed from the values), text and blobs as arrays of
    objects, each cast to its column's type (``'2024-01-02'`` to DATE, say): 2-3x faster
    than binding each column as a list parameter."""
    import numpy as np

    definition = ", ".join(f'"{row[1]}" {kind}' for row, kind in zip(info, types, strict=True))
    connection.execute(f"CREATE OR REPLACE TABLE {table} ({definition})")
    if not columns or not columns[0]:
        return
    arrays, values = {}, []
    for i, (kind, column) in enumerate(zip(types, columns, strict=True)):
        value = f"CAST(v{i} AS {kind})"
        if kind not in _NUMPY_TYPES:
            arrays[f"v{i}"] = np.array(column, dtype=object)
        elif None in column:
            arrays[f"n{i}"] = np.array([v is None for v in column])
            arrays[f"v{i}"] = np.array([0 if v is None else v for v in column], _NUMPY_TYPES[kind])
            value = f"CASE WHEN n{i} THEN NULL ELSE {value} END"
        else:
            arrays[f"v{i}"] = np.array(column, _NUMPY_TYPES[kind])
        values.append(value)
    connection.register(_LOAD_VIEW, arrays)
    try:
        connection.execute(f"INSERT INTO {table} SELECT {', '.join(values)} FROM {_LOAD_VIEW}")
    finally:
        connection.unregister(_LOAD_VIEW)


def load_database(path: str) -> None:
    """(In the worker) copy the SQLite file ``path`` into memory, if not done already."""
    _the_store().load(path)


def _parse(entry: _Loaded, sql: str) -> Any:
    """``sql``'s one SELECT statement, parsed (run as it is: DuckDB parses it once), or a
    :class:`Refusal` that says why it may not run."""
    duckdb = import_duckdb()
    try:
        statements = entry.cursor.extract_statements(sql)
    except duckdb.Error as error:
        return Refusal(f"syntax error: {error}", syntax=True)
    if len(statements) != 1:
        return Refusal(f"give exactly one SQL statement, got {len(statements)}", syntax=True)
    if statements[0].type != duckdb.StatementType.SELECT:
        return Refusal(READ_ONLY_MESSAGE)
    lowered = sql.lower()
    if any(name in lowered for name in _SUSPECT_NAMES):
        refusal = _check_names(entry, sql)
        if refusal is not None:
            return refusal
    return statements[0]  # no refused name can be written without these letters


def _check_names(entry: _Loaded, sql: str) -> Refusal | None:
    """A :class:`Refusal` when the parsed statement calls a refused function or reads a
    table outside the episode's database, however it is written (comments, quotes,
    qualified names): DuckDB's own parse tree is walked, not the text."""
    reply = entry.cursor.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    tree = json.loads(reply)
    if tree.get("error"):
        return Refusal(f"error: the query could not be checked: {tree.get('error_message')}")
    for node in _nodes(tree):
        function = str(node.get("function_name", "")).lower()
        if function and (function in _DENIED_CALLS or function.startswith(_CATALOG_PREFIXES)):
            return Refusal(_REFUSED)
        if node.get("type") == "BASE_TABLE" and not _own_table(node):
            return Refusal(_REFUSED)
    return None


def _own_table(node: dict[str, Any]) -> bool:
    """Whether a table reference names a table of the episode's database (unqualified: the
    cursor's schema is the episode's) or of ``information_schema`` (names, no data), and
    not a catalog view."""
    table = str(node.get("table_name", "")).lower()
    schema = str(node.get("schema_name", "")).lower()
    return (
        not node.get("catalog_name")
        and schema in ("", "information_schema")
        and not table.startswith(_CATALOG_PREFIXES)
    )


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in a parse tree (iteratively: a deep tree cannot overflow)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def run_query(path: str, sql: str, max_rows: int, timeout: float) -> QueryResult | Refusal | str:
    """(In the worker) run ``sql`` on the loaded database of ``path``: its result, a
    :class:`Refusal`, or :data:`UNLOADED`."""
    duckdb = import_duckdb()
    store = _the_store()
    entry = store.get(path)
    if entry is None:
        return UNLOADED
    statement = _parse(entry, sql)
    if isinstance(statement, Refusal):
        return statement
    store.watchdog.arm(entry.cursor, timeout)
    try:
        cursor = entry.cursor.execute(statement)
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
