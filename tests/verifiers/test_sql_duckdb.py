"""The DuckDB backend: graded against SQLite's gold result, and held to its limits."""

from __future__ import annotations

import ast
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")
pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")

import palaestra.verifiers.sql as sqlite_backend
import palaestra.verifiers.sql_duckdb as duckdb_backend
import palaestra.verifiers.sql_duckdb_worker as duckdb_worker
from palaestra.verifiers.sql import SQLiteDatabase, execution_match
from palaestra.verifiers.sql_backend import Database, SQLError, open_database
from palaestra.verifiers.sql_duckdb import DuckDBDatabase, new_pool


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("duck") / "t.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE big (id INTEGER PRIMARY KEY, grade INTEGER, city TEXT, score REAL);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO big SELECT i, i % 7, CASE WHEN i % 3 = 0 THEN 'Lisbon' ELSE 'Perth' END,
            i / 8.0 FROM n;
        CREATE TABLE ev (id INTEGER, day DATE, stamp DATETIME);
        INSERT INTO ev VALUES (1, '2024-03-01', '2024-03-01 05:15:00'), (2, NULL, NULL);
    """)
    connection.commit()
    connection.close()
    return path


def duck(predicted: str, gold: str, db: Path) -> float:
    return execution_match(predicted, gold, db, backend="duckdb")


def test_graded_against_the_sqlite_gold_not_a_transpiled_one(db):
    gold = "SELECT SUM(grade) / COUNT(*) FROM big"  # integer division on SQLite: 2
    assert duck("SELECT AVG(grade) FROM big", gold, db) == 0.0
    assert duck("SELECT SUM(grade) // COUNT(*) FROM big", gold, db) == 1.0
    like = "SELECT id FROM big WHERE city LIKE 'lisbon'"  # case-insensitive on SQLite
    assert duck("SELECT id FROM big WHERE FALSE", like, db) == 0.0
    assert duck("SELECT id FROM big WHERE city LIKE 'lisbon'", like, db) == 0.0
    assert duck("SELECT id FROM big WHERE city ILIKE 'lisbon'", like, db) == 1.0


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("SELECT COUNT(*) * 1.0 FROM big", "SELECT COUNT(*) FROM big"),  # a DECIMAL
        ("SELECT score::DECIMAL(10, 3) FROM big", "SELECT score FROM big"),
        ("SELECT day, stamp FROM ev", "SELECT day, stamp FROM ev"),  # DATE and TIMESTAMP vs text
        ("SELECT stamp, day, id FROM ev", "SELECT id, day, stamp FROM ev"),
    ],
)
def test_duckdb_types_are_normalized(db, predicted, gold):
    assert duck(predicted, gold, db) == 1.0


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM duckdb_databases()",
        "SELECT path FROM duckdb_databases",
        "SELECT current_setting('temp_directory')",
        "SELECT * FROM duckdb_settings()",
        "SELECT * FROM pg_settings",
        "SELECT * FROM pragma_database_list",
        'SELECT * FROM "duckdb_extensions"()',
        "SELECT * FROM query('SELECT * FROM duckdb_' || 'settings()')",
        "PRAGMA database_list",
        "SELECT * FROM palaestra_db_1.big",
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY big TO 'out.csv'",
        "ATTACH 'x.duckdb' AS x",
        "SET memory_limit = '100GB'",
    ],
)
def test_path_revealing_and_external_queries_are_refused(db, query):
    database = DuckDBDatabase(db)
    with pytest.raises(SQLError, match="not allowed"):
        database.query(query)


def test_nothing_shown_names_a_host_path(db):
    database = DuckDBDatabase(db)
    shown = str(database.query("SELECT * FROM information_schema.schemata").rows)
    shown += database.schema() + str(database.query("SHOW ALL TABLES").rows)
    assert str(db.parent) not in shown and "/" not in shown


def test_memory_is_capped_per_query(db):
    database = DuckDBDatabase(db)
    for hog in [
        "SELECT length(repeat('x', 4000000000))",
        "SELECT length(lpad('x', 1500000000, 'y'))",
        "SELECT length(string_agg(repeat('x', 100000), ',')) FROM range(30000)",
    ]:
        with pytest.raises(SQLError, match=r"memory|time limit|worker"):
            database.query(hog, timeout=2.0)
    assert database.query("SELECT COUNT(*) FROM big").rows == [(5000,)]


def test_results_are_capped_in_rows_and_bytes(db):
    database = DuckDBDatabase(db)
    with pytest.raises(SQLError, match="bytes"):
        database.query("SELECT repeat('x', 100000) FROM range(200)")
    result = database.query("SELECT id FROM big", max_rows=10)
    assert len(result.rows) == 10 and result.truncated


def test_a_single_uninterruptible_call_is_stopped_by_killing_its_worker(db):
    pool = new_pool()
    database = DuckDBDatabase(db, pool=pool, kill_grace=0.0)
    database.query("SELECT 1")
    before = pool.pids
    with pytest.raises(SQLError, match="time limit"):  # writing 400 MB takes over 10 ms
        database.query("SELECT length(repeat('x', 400000000))", timeout=0.01)
    assert database.query("SELECT COUNT(*) FROM big").rows == [(5000,)]  # reloaded
    assert pool.pids != before
    pool.close()


def test_workers_side_by_side_each_answer_from_their_own_load(tmp_path):
    """Envs stepped on threads: their queries and catalog reads run on several workers at
    once, each worker loading a file the first time a query of it comes its way."""
    paths = []
    for index in range(3):
        path = tmp_path / f"n{index}.sqlite"
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE n (v INTEGER)")
        connection.executemany("INSERT INTO n VALUES (?)", [(v,) for v in range(index + 1)])
        connection.commit()
        connection.close()
        paths.append(path)
    pool = new_pool(2)
    databases = [DuckDBDatabase(path, pool=pool) for path in paths]

    def ask(task: int) -> tuple[list, list]:
        database = databases[task % 3]
        result = database.query(f"SELECT COUNT(*) + 0 * {task} FROM n")
        return result.rows, database.tables()

    try:
        with ThreadPoolExecutor(6) as threads:
            answers = list(threads.map(ask, range(60)))
        assert answers == [([(task % 3 + 1,)], ["n"]) for task in range(60)]
    finally:
        pool.close()


def test_a_query_whose_worker_was_taken_after_the_load_loads_where_it_runs(tmp_path, monkeypatch):
    path = tmp_path / "one.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE n (v INTEGER)")
    connection.execute("INSERT INTO n VALUES (7)")
    connection.commit()
    connection.close()
    pool = new_pool(2)
    starts = [pool.submit(os.getpid, timeout=60) for _ in range(2)]
    assert len({start.result() for start in starts}) == 2
    database = DuckDBDatabase(path, pool=pool)
    taken = []
    load = DuckDBDatabase._call

    def load_then_take_its_worker(self, function, *args, timeout):
        reply = load(self, function, *args, timeout=timeout)
        if function is duckdb_worker.load_database and not taken:  # another thread's call
            taken.append(pool.submit(time.sleep, (1.0,), timeout=60, prefer=str(self.path)))
        return reply

    monkeypatch.setattr(DuckDBDatabase, "_call", load_then_take_its_worker)
    try:
        assert database.query("SELECT v FROM n").rows == [(7,)]
        assert taken and database.tables() == ["n"]
        taken[0].result()
    finally:
        pool.close()


def test_runaway_query_is_interrupted(db):
    database = DuckDBDatabase(db)
    runaway = (
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT COUNT(*) FROM c"
    )
    with pytest.raises(SQLError, match="time limit"):
        database.query(runaway, timeout=0.3)
    assert database.query("SELECT COUNT(*) FROM big").rows == [(5000,)]


def test_syntax_errors_and_several_statements(db):
    database = DuckDBDatabase(db)
    with pytest.raises(SQLError, match="syntax error") as error:
        database.query("SELEC 1")
    assert error.value.syntax
    with pytest.raises(SQLError, match="exactly one"):
        database.query("SELECT 1; SELECT 2")


def test_a_rebuilt_file_is_loaded_again(tmp_path):
    path = tmp_path / "r.sqlite"
    for value in (1, 2):
        path.unlink(missing_ok=True)
        connection = sqlite3.connect(path)
        connection.executescript(f"CREATE TABLE t (x INTEGER); INSERT INTO t VALUES ({value});")
        connection.commit()
        connection.close()
        assert DuckDBDatabase(path).query("SELECT x FROM t").rows == [(value,)]


def test_text_that_does_not_fit_its_declared_type_loads_as_text(tmp_path):
    path = tmp_path / "messy.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), ('two');")
    connection.commit()
    connection.close()
    assert sorted(DuckDBDatabase(path).query("SELECT n FROM t").rows) == [("1",), ("two",)]


def test_both_backends_implement_one_protocol_and_do_not_import_each_other(db):
    pairs = [(sqlite_backend, "sql_duckdb"), (sqlite_backend, "sql_duckdb_worker")]
    pairs += [(duckdb_backend, "sql"), (duckdb_worker, "sql")]
    for module, other in pairs:
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom | ast.Import)
            for name in (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
            )
        }
        assert f"palaestra.verifiers.{other}" not in imported, module.__name__
    for backend, kind in [("sqlite", SQLiteDatabase), ("duckdb", DuckDBDatabase)]:
        database = open_database(db, backend)
        assert isinstance(database, kind) and isinstance(database, Database)
        assert database.tables() == ["big", "ev"]
        assert "grade" in database.describe("big")
    with pytest.raises(ValueError, match="unknown SQL backend"):
        open_database(db, "oracle")


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
@pytest.mark.parametrize(
    ("predicted", "score"),
    [
        ("SELECT CAST(1900620676901 AS DOUBLE)", 0.0),
        ("SELECT 1900620676901.0", 0.0),
        ("SELECT CAST(1900620676900 AS DOUBLE)", 1.0),
        ("SELECT 1900620676900.0", 1.0),
    ],
)
def test_integers_compare_exactly_on_both_backends(db, backend, predicted, score):
    gold = "SELECT 1900620676900"
    assert execution_match(predicted, gold, db, backend=backend) == score


@pytest.fixture(scope="module")
def spider_style(tmp_path_factory) -> Path:
    """Values as Spider/BIRD files hold them: a DATE column with a word in it, timestamps
    written with a T, a REAL column holding integers, an untyped column of mixed values."""
    path = tmp_path_factory.mktemp("spider") / "s.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE sales (id INTEGER, day DATE, sold_at DATETIME, amount REAL, note);
        INSERT INTO sales VALUES (1, '2024-03-01', '2024-10-07T22:30', 5, 'a'),
            (2, 'unknown', '2024-10-07 22:30:00', 2.5, 7),
            (3, NULL, NULL, 10, x'00ff');
        CREATE TABLE typed (id INTEGER, day DATE, stamp DATETIME);
        INSERT INTO typed VALUES (1, '2024-03-01', '2024-03-01 05:15:00');
    """)
    connection.commit()
    connection.close()
    return path


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id FROM sales",
        "SELECT day FROM sales",
        "SELECT sold_at FROM sales",
        "SELECT note FROM sales WHERE id = 1",
        "SELECT amount FROM sales",
        "SELECT id, day, sold_at, amount FROM sales WHERE id < 3",
        "SELECT id, day FROM typed",
    ],
)
def test_spider_style_files_load_with_the_values_sqlite_returns(spider_style, query):
    assert (
        open_database(spider_style, "duckdb").query(query).rows
        == (SQLiteDatabase(spider_style).query_trusted(query).rows)
        or duck(query, query, spider_style) == 1.0
    )
    assert duck(query, query, spider_style) == 1.0


def test_types_fall_back_per_column_not_per_table(spider_style):
    described = open_database(spider_style, "duckdb").describe("sales")
    assert "id BIGINT" in described and "amount DOUBLE" in described
    assert "day VARCHAR" in described and "sold_at VARCHAR" in described  # as stored
    typed = open_database(spider_style, "duckdb").describe("typed")
    assert "day DATE" in typed and "stamp TIMESTAMP" in typed  # dates still work as dates
    rows = open_database(spider_style, "duckdb").query("SELECT sold_at FROM sales ORDER BY id").rows
    assert rows[0] == ("2024-10-07T22:30",)
