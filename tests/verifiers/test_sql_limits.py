"""Limits that hold for any single call, on both backends: time, result size, refusals,
isolation between databases, and workers that failed to answer."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.verifiers.sql import SQLiteDatabase, execution_match
from palaestra.verifiers.sql_backend import SQLError, open_database
from palaestra.verifiers.sql_results import results
from palaestra.verifiers.worker import WorkerError, WorkerPool


def _make(path: Path, table: str, rows: int) -> Path:
    connection = sqlite3.connect(path)
    connection.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
    connection.executemany(
        f"INSERT INTO {table} VALUES (?, ?)", [(i, f"secret-{i}") for i in range(rows)]
    )
    connection.commit()
    connection.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("limits") / "a.sqlite", "t", 5)


@pytest.fixture(scope="module")
def other_db(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("limits") / "b.sqlite", "patients", 487)


# one trim(X, Y) that strips 98,000 characters, each looked up among Y's 8,001, is a
# single SQLite VM step of seconds (20 s on a loaded machine): the progress handler never
# runs inside it, so only a worker killed at the limit stops it
SLOW_CALLS = (
    "SELECT length(trim(replace(hex(zeroblob(49000)), '0', 'b'), "
    "replace(hex(zeroblob(4000)), '0', 'a') || 'b'))"
)


def test_sqlite_time_limit_holds_inside_one_function_call(db):
    database = SQLiteDatabase(db)
    with pytest.raises(SQLError, match="time limit"):
        database.query(SLOW_CALLS, timeout=0.3)
    assert execution_match(SLOW_CALLS, "SELECT 1", db, timeout=0.3) == 0.0
    assert database.query("SELECT COUNT(*) FROM t").rows == [(5,)]  # a fresh worker answers


def test_sqlite_gold_runs_in_process_and_the_answer_in_a_worker(db):
    database = SQLiteDatabase(db)
    assert database.query_trusted("SELECT COUNT(*) FROM t").rows == [(5,)]
    assert database.query("SELECT COUNT(*) FROM t").rows == [(5,)]
    with pytest.raises(SQLError, match="read-only"):
        database.query("DELETE FROM t")


def _close_pipes_and_linger() -> None:
    """(In a worker) break the answer pipe while the process stays alive a moment: the
    parent reads EOF from a worker that has not exited yet."""
    os.closerange(3, 1024)
    time.sleep(1)


def _unpicklable_answer() -> object:
    return lambda: None


def test_a_worker_that_failed_to_answer_is_never_reused():
    pool = WorkerPool(1, memory_mb=None)
    try:
        with pytest.raises(WorkerError, match="died"):
            pool.call(_close_pipes_and_linger, timeout=10)
        assert pool.call(pow, (2, 5), timeout=30) == 32  # not BrokenPipeError
        with pytest.raises(WorkerError, match="could not be sent back"):
            pool.call(_unpicklable_answer, timeout=10)
        assert pool.call(pow, (2, 6), timeout=30) == 64
    finally:
        pool.close()


@pytest.fixture(scope="module")
def duck():
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT list_transform(range(60), lambda x: repeat('y', 1000000))",
        "SELECT {'a': repeat('z', 1000000), 'b': repeat('z', 1000000)} FROM range(20)",
        "SELECT [repeat('q', 100000)] FROM range(100)",
    ],
)
def test_duckdb_result_size_counts_nested_values(duck, db, query):
    database = open_database(db, "duckdb")
    with pytest.raises(SQLError, match="bytes"):
        database.query(query)
    assert execution_match(query, "SELECT 1", db, backend="duckdb") == 0.0
    assert database.query("SELECT COUNT(*) FROM t").rows == [(5,)]  # the worker still answers


@pytest.mark.parametrize(
    "query",
    [
        "SELECT current_setting/**/('secret_directory')",
        "SELECT * FROM query/**/('SELECT name, value FROM duckdb_settings()')",
        "SELECT \"current_setting\"('memory_limit')",
        "SELECT * FROM main.query('SELECT 1')",
        "SELECT * FROM query_table -- a comment\n ('t')",
        "SELECT * FROM system.main.duckdb_settings()",
    ],
)
def test_duckdb_refusals_hold_however_the_call_is_written(duck, db, query):
    with pytest.raises(SQLError, match="not allowed"):
        open_database(db, "duckdb").query(query)


def test_duckdb_query_reaches_only_its_own_database(duck, db, other_db):
    mine, theirs = open_database(db, "duckdb"), open_database(other_db, "duckdb")
    assert len(theirs.query("SELECT * FROM patients").rows) == 487  # both loaded in one worker
    for schema in range(1, 40):
        for attack in [
            f"SELECT * FROM query_table/**/('palaestra_db_{schema}.patients')",
            f"SELECT * FROM palaestra_db_{schema}.patients",
            f'SELECT * FROM "palaestra_db_{schema}"."patients"',
            f"SELECT * FROM memory.palaestra_db_{schema}.patients",
        ]:
            with pytest.raises(SQLError, match="not allowed"):
                mine.query(attack)
    with pytest.raises(SQLError, match="does not exist"):
        mine.query("SELECT * FROM patients")
    assert mine.query("SELECT COUNT(*) FROM information_schema.tables").rows[0][0] >= 1


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
def test_reset_and_step_survive_a_killed_worker(backend):
    if backend == "duckdb":
        pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    import palaestra
    from palaestra.verifiers import sql, sql_duckdb

    pool = (sql if backend == "sqlite" else sql_duckdb).default_pool()
    env = palaestra.make("sql:Shop-v0", backend=backend, suite=0)
    for seed in range(2):
        observation, _ = env.reset(seed=seed)
        answer = env.oracle()(observation)
        results.clear()  # the oracle may have run its answer: the step must run it again
        for pid in pool.pids:
            os.kill(pid, 9)
        hits = results.hits
        assert env.step(answer)[1] == 1.0
        assert results.hits == hits
        for pid in pool.pids:
            os.kill(pid, 9)
