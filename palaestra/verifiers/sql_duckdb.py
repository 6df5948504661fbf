"""DuckDB as the SQL backend (extra ``duckdb``): the same databases, queries in DuckDB's dialect.

:func:`duckdb_copy` turns a SQLite file into a DuckDB file once (cached beside the other
generated databases); :class:`DuckDBDatabase` opens it read-only with external access off
(no files, no ``ATTACH``, no extension loading, configuration locked) and runs one query
under a time limit (an interrupt from a timer) and a row cap, like the SQLite backend.
"""

from __future__ import annotations

import csv
import hashlib
import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from palaestra.core.cache import cache_root
from palaestra.verifiers.sql import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    READ_ONLY_MESSAGE,
    QueryResult,
    SQLError,
    check_size,
    transpile,
)

NULL = "\\N"
"""How a NULL is written in the CSV files the DuckDB copy is loaded from."""
_TYPES = {
    "INTEGER": "BIGINT",
    "REAL": "DOUBLE",
    "TEXT": "VARCHAR",
    "DATE": "DATE",
    "DATETIME": "TIMESTAMP",
}


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError as error:
        raise ImportError(
            "the DuckDB backend needs the duckdb package: pip install 'palaestra[duckdb]'"
        ) from error
    return duckdb


def duckdb_copy(sqlite_path: str | Path) -> Path:
    """A DuckDB file with the tables and rows of ``sqlite_path`` (built once, cached by the
    SQLite file's content hash)."""
    duckdb = _import_duckdb()
    source = Path(sqlite_path)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache_root() / "sql" / "duckdb" / f"{source.stem}-{digest}.duckdb"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".duckdb")
    os.close(handle)
    os.unlink(temporary)  # duckdb creates the file itself
    reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    writer = duckdb.connect(temporary)
    try:
        tables = [
            r[0]
            for r in reader.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
            )
        ]
        for table in tables:
            columns = reader.execute(f'PRAGMA table_info("{table}")').fetchall()
            definition = ", ".join(
                f'"{name}" {_TYPES.get(kind.upper(), "VARCHAR")}' for _, name, kind, *_ in columns
            )
            writer.execute(f'CREATE TABLE "{table}" ({definition})')
            rows = reader.execute(f'SELECT * FROM "{table}"')
            csv_path = Path(temporary).with_suffix(f".{len(definition)}.csv")
            try:  # through a CSV file: executemany takes seconds for a few thousand rows
                with csv_path.open("w", newline="", encoding="utf-8") as handle:
                    out = csv.writer(handle)
                    for row in rows:
                        out.writerow(NULL if value is None else value for value in row)
                writer.execute(
                    f"COPY \"{table}\" FROM '{csv_path}' (FORMAT csv, HEADER false, NULLSTR '{NULL}')"
                )
            finally:
                csv_path.unlink(missing_ok=True)
        writer.close()
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    finally:
        reader.close()
    return target


class DuckDBDatabase:
    """A read-only DuckDB database (see module docstring)."""

    dialect = "duckdb"

    def __init__(self, path: str | Path) -> None:
        duckdb = _import_duckdb()
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no DuckDB database at {self.path}")
        self.connection = duckdb.connect(
            str(self.path),
            read_only=True,
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "lock_configuration": True,
                "threads": 1,
            },
        )
        self._lock = threading.Lock()

    def query(
        self, sql: str, *, timeout: float = DEFAULT_TIMEOUT, max_rows: int = DEFAULT_MAX_ROWS
    ) -> QueryResult:
        """Run one read-only query; raises :class:`SQLError` with the reason otherwise."""
        import duckdb
        import sqlglot
        from sqlglot import exp

        check_size(sql)
        transpile(sql, "duckdb", "duckdb")  # a syntax error or several statements: say so
        statement = sqlglot.parse_one(sql, read="duckdb")
        if not isinstance(statement, exp.Query):
            raise SQLError(READ_ONLY_MESSAGE)
        with self._lock:  # one query at a time per connection, each with its own timer
            timer = threading.Timer(timeout, self.connection.interrupt)
            timer.start()
            try:
                cursor = self.connection.execute(sql)
                rows = cursor.fetchmany(max_rows + 1)
                columns = [d[0] for d in cursor.description or ()]
            except duckdb.InterruptException:
                raise SQLError(f"the query ran past the time limit of {timeout:g} s") from None
            except duckdb.ParserException as error:
                raise SQLError(f"syntax error: {error}", syntax=True) from None
            except duckdb.PermissionException:
                raise SQLError(READ_ONLY_MESSAGE) from None
            except (duckdb.Error, OverflowError, MemoryError, ValueError) as error:
                raise SQLError(f"error: {error}") from None
            finally:
                timer.cancel()
        return QueryResult(columns, rows[:max_rows], truncated=len(rows) > max_rows)

    def tables(self) -> list[str]:
        return [
            r[0]
            for r in self.connection.execute(
                "SELECT table_name FROM duckdb_tables() ORDER BY table_name"
            ).fetchall()
        ]

    def describe(self, table: str) -> str:
        rows = self.connection.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
        return "\n".join(
            f"{name} {kind}{'' if nullable else ' NOT NULL'}" for name, kind, nullable in rows
        )

    def schema(self) -> str:
        rows = self.connection.execute(
            "SELECT sql FROM duckdb_tables() ORDER BY table_name"
        ).fetchall()
        return "\n".join(" ".join(r[0].split()) for r in rows)

    def close(self) -> None:
        self.connection.close()
