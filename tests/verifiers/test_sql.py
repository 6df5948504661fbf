"""Execution grading of SQL: equivalences, near-misses, edge cases, and attacks."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.verifiers.sql import (
    SQLError,
    connect_readonly,
    execution_match,
    results_match,
    run_query,
    to_sqlite,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "t.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, team TEXT);
        INSERT INTO t VALUES (1, 'Ann', 1.5, 'red'), (2, 'Bo', NULL, 'red'),
            (3, 'Cy', 2.25, 'blue'), (4, 'O''Hara', 2.25, NULL), (5, 'Zoë', 0.1, 'blue');
        CREATE TABLE d (x INTEGER);
        INSERT INTO d VALUES (1), (1), (2);
        CREATE TABLE big (id INTEGER PRIMARY KEY, grade INTEGER, city TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO big SELECT i, i % 7, CASE WHEN i % 3 = 0 THEN 'Lisbon' ELSE 'Perth' END FROM n;
        CREATE TABLE wide (a, b, c, d, e, f, g);
        INSERT INTO wide VALUES (1, 'x', 2.5, NULL, 'y', 3, 'z'), (4, 'u', 0.5, 7, 'v', 8, 'w');
    """)
    connection.commit()
    connection.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("SELECT name FROM t WHERE team = 'red'", "SELECT name FROM t WHERE team = 'red'"),
        (
            "select NAME from t where id <= 2",
            "SELECT name FROM t WHERE team = 'red'",
        ),  # other SQL, same rows
        (
            "SELECT name FROM t WHERE id IN (SELECT id FROM t WHERE team = 'red')",
            "SELECT name FROM t WHERE team = 'red'",
        ),
        ("SELECT score, name FROM t", "SELECT name, score FROM t"),  # column order
        ("SELECT name FROM t ORDER BY name DESC", "SELECT name FROM t"),  # gold does not order
        ("SELECT COUNT(*) * 1.0 FROM t", "SELECT COUNT(*) FROM t"),  # 5.0 == 5
        ("SELECT 0.1 + 0.2", "SELECT 0.3"),  # float tolerance
        ("SELECT x FROM d", "SELECT x FROM d ORDER BY x"),  # the order happens to match
        ("SELECT name FROM t WHERE team IS NULL", "SELECT name FROM t WHERE id = 4"),  # NULL filter
        ("SELECT `name` FROM `t` WHERE id = 1", "SELECT name FROM t WHERE id = 1"),
    ],
)
def test_equivalent_queries_match(db, predicted, gold):
    assert execution_match(predicted, gold, db) == 1.0


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("SELECT DISTINCT x FROM d", "SELECT x FROM d"),  # duplicates count
        ("SELECT x FROM d ORDER BY x DESC", "SELECT x FROM d ORDER BY x"),  # gold orders
        ("SELECT name FROM t WHERE team = 'blue'", "SELECT name FROM t WHERE team = 'red'"),
        ("SELECT name, team FROM t", "SELECT name FROM t"),  # an extra column
        ("SELECT score FROM t WHERE id = 2", "SELECT 0"),  # NULL is not 0
        ("SELECT 'NULL'", "SELECT NULL"),
        ("SELECT '5'", "SELECT 5"),  # text is not a number
        ("SELECT 0.3001", "SELECT 0.3"),
        ("SELECT name FROM t LIMIT 1", "SELECT name FROM t"),
        ("SELECT SUM(id) - 1 FROM big", "SELECT SUM(id) FROM big"),  # 12,502,499 vs 12,502,500
        (  # 1,514,997 vs 1,515,000
            "SELECT COUNT(*) - 3 FROM big a, big b WHERE a.id <= 303",
            "SELECT COUNT(*) FROM big a, big b WHERE a.id <= 303",
        ),
        ("SELECT 1000004", "SELECT 1000000"),
        ("SELECT SUM(id) * 1.0 - 1 FROM big", "SELECT SUM(id) FROM big"),
        ("SELECT AVG(grade) FROM big", "SELECT SUM(grade) / COUNT(*) FROM big"),  # 2.9994 vs 2
    ],
)
def test_different_results_that_look_alike_do_not_match(db, predicted, gold):
    assert execution_match(predicted, gold, db) == 0.0


def test_a_wide_answer_in_another_column_order_matches(db):
    assert execution_match("SELECT g, f, e, d, c, b, a FROM wide", "SELECT * FROM wide", db) == 1.0
    assert execution_match("SELECT g, f, e, d, c, a, a FROM wide", "SELECT * FROM wide", db) == 0.0


def test_ties_in_the_gold_order_accept_a_finer_order(db):
    gold = "SELECT id, grade FROM big WHERE id <= 30 ORDER BY grade DESC"
    finer = "SELECT id, grade FROM big WHERE id <= 30 ORDER BY grade DESC, id DESC"
    assert execution_match(finer, gold, db) == 1.0
    swapped = "SELECT grade, id FROM big WHERE id <= 30 ORDER BY grade DESC, id"
    assert execution_match(swapped, gold, db) == 1.0
    reversed_ = "SELECT id, grade FROM big WHERE id <= 30 ORDER BY grade"
    assert execution_match(reversed_, gold, db) == 0.0
    hidden = "SELECT id FROM big WHERE id <= 30 ORDER BY grade DESC"  # the key is not a column
    by_key = "SELECT id FROM big WHERE id <= 30 ORDER BY grade DESC, id"
    assert execution_match(by_key, hidden, db) == 1.0
    assert execution_match("SELECT id FROM big WHERE id <= 30 ORDER BY id", hidden, db) == 0.0


def test_results_match_edge_cases():
    assert results_match([], [])
    assert results_match([(None, 1)], [(None, 1.0)])
    assert not results_match([(1,), (1,), (2,)], [(1,), (2,), (2,)])
    assert results_match([(2, "a"), (1, "b")], [("a", 2), ("b", 1)])
    assert not results_match([(1, "a"), (2, "b")], [("a", 2), ("b", 1)])  # rows are kept whole
    assert not results_match([(1, 2)], [(1,)])
    assert results_match([(float("nan"),)], [(float("nan"),)])


def test_other_dialects_are_transpiled(db):
    assert (
        execution_match(
            "SELECT name FROM t WHERE team = 'red' LIMIT 1", "SELECT 'Ann'", db, dialect="mysql"
        )
        == 1.0
    )
    assert to_sqlite("SELECT TOP 1 name FROM t", "tsql").upper().endswith("LIMIT 1")
    assert (
        execution_match('SELECT "name" FROM t WHERE id = 1', "SELECT 'Ann'", db, dialect="postgres")
        == 1.0
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC name FROM t", "syntax error"),
        ("SELECT name FROM t WHERE (id = 1", "syntax error"),
        ("", "empty"),
        ("SELECT 1; SELECT 2", "exactly one SQL statement"),
        ("SELECT 1 " + "+ 1 " * 10_000, "characters long"),
    ],
)
def test_unreadable_queries_get_a_helpful_message(sql, message):
    with pytest.raises(SQLError, match=message):
        to_sqlite(sql)


ATTACKS = [
    "DELETE FROM t",
    "DROP TABLE t",
    "UPDATE t SET score = 100",
    "INSERT INTO t VALUES (9, 'x', 1, 'red')",
    "CREATE TABLE evil (x)",
    "ALTER TABLE t ADD COLUMN pwned TEXT",
    "ATTACH DATABASE '/tmp/evil.sqlite' AS evil",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA query_only = 0",
    "SELECT load_extension('/tmp/evil.so')",
    "VACUUM",
    "VACUUM INTO '/tmp/copy.sqlite'",
    "REINDEX",
    "BEGIN IMMEDIATE",
    "CREATE TEMP TABLE x AS SELECT * FROM t",
    "WITH x AS (SELECT 1) DELETE FROM t",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_destructive_queries_are_refused_and_the_file_is_unchanged(db, attack):
    before = digest(db)
    connection = connect_readonly(db)
    with pytest.raises(SQLError):
        run_query(connection, attack)
    connection.close()
    assert execution_match(attack, "SELECT 1", db) == 0.0
    assert digest(db) == before
    assert run_query(connect_readonly(db), "SELECT COUNT(*) FROM t").rows == [(5,)]


def test_refusals_say_why(db):
    with pytest.raises(SQLError, match="read-only"):
        run_query(connect_readonly(db), "DELETE FROM t")


def test_schema_lookups_are_allowed(db):
    connection = connect_readonly(db)
    names = [row[1] for row in run_query(connection, "PRAGMA table_info(t)").rows]
    assert names == ["id", "name", "score", "team"]
    assert run_query(
        connection, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).rows == [("big",), ("d",), ("t",), ("wide",)]


@pytest.mark.parametrize(
    "runaway",
    [
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT COUNT(*) FROM c",
        "SELECT COUNT(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l",
        "SELECT randomblob(1000) FROM t a, t b, t c, t d, t e, t f, t g, t h ORDER BY 1",
    ],
)
def test_runaway_queries_stop_at_the_time_limit(db, runaway):
    connection = connect_readonly(db)
    with pytest.raises(SQLError, match="time limit"):
        run_query(connection, runaway, timeout=0.2)
    assert execution_match(runaway, "SELECT 1", db, timeout=0.2) == 0.0


def test_row_cap_on_both_queries(db):
    connection = connect_readonly(db)
    result = run_query(connection, "SELECT * FROM t", max_rows=2)
    assert len(result.rows) == 2 and result.truncated
    assert execution_match("SELECT name FROM t", "SELECT 1", db, max_rows=2) == 0.0
    with pytest.raises(SQLError, match="max_rows"):
        execution_match("SELECT 1", "SELECT name FROM t", db, max_rows=2)


@pytest.mark.parametrize(
    "hostile",
    [
        "\x00",
        "SELECT '\x00'",
        "SELECT " + "(" * 5000 + "1" + ")" * 5000,
        "' OR 1=1 --",
        "SELECT zeroblob(1e12)",
        "SELECT printf('%.*c', 2147483647, 'x')",
        "SELECT format('%.*c', 2147483647, 'x')",
        "SELECT hex(zeroblob(50000)) LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%b'",
        "SELECT replace(hex(zeroblob(40000)), '0', hex(zeroblob(40000)))",
        "SELECT * FROM nonexistent",
        "😀",
        "SELECT 1e999999",
    ],
    ids=lambda text: repr(text[:24]),
)
def test_hostile_inputs_never_raise(db, hostile):
    assert execution_match(hostile, "SELECT 1", db) in (0.0, 1.0)


def test_results_are_capped_in_total_bytes(db):
    wide = "SELECT hex(zeroblob(49999)), hex(zeroblob(49999)), hex(zeroblob(49999)) FROM big"
    with pytest.raises(SQLError, match="over 8,000,000 bytes"):
        run_query(connect_readonly(db), wide)
    assert execution_match(wide, "SELECT 1", db) == 0.0
    assert len(run_query(connect_readonly(db), wide, max_rows=20).rows) == 20  # 6 MB is fine


@pytest.mark.parametrize(
    "refused",
    [
        "SELECT fts3_tokenizer('simple')",
        "SELECT fts3_tokenizer('mine', x'0000000000000000')",
        "SELECT file FROM pragma_database_list",
    ],
)
def test_functions_that_reveal_or_register_are_refused(db, refused):
    connection = connect_readonly(db)
    with pytest.raises(SQLError, match="not allowed"):
        run_query(connection, refused)


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no SQLite database"):
        connect_readonly(tmp_path / "missing.sqlite")
