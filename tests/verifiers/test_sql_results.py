"""The result cache both SQL backends answer agents' queries from: a query asked again of the
same file is answered without running, and never when the answer could differ."""

from __future__ import annotations

import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.verifiers.sql_backend import QueryResult, SQLError, open_database
from palaestra.verifiers.sql_results import ResultCache, results


def _write(path: Path, names: list[str]) -> Path:
    """A database of ``names`` at ``path``, written beside and moved in (as the caches do)."""
    temporary = path.with_suffix(".tmp")
    connection = sqlite3.connect(temporary)
    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    connection.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(names)))
    connection.commit()
    connection.close()
    os.replace(temporary, path)
    return path


@pytest.fixture(params=["sqlite", "duckdb"])
def backend(request) -> str:
    if request.param == "duckdb":
        pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    return request.param


@pytest.fixture
def db(tmp_path) -> Path:
    return _write(tmp_path / "people.sqlite", ["ada", "bo", "cy", "di"])


def test_a_repeated_query_is_answered_without_running(backend, db):
    database = open_database(db, backend)
    try:
        first = database.query("SELECT name FROM t ORDER BY id")
        hits = results.hits
        assert database.query("SELECT name FROM t ORDER BY id") == first
        assert results.hits == hits + 1
        os.utime(db, ns=(time.time_ns(), db.stat().st_mtime_ns))  # marked used, as at a reset
        assert database.query("SELECT name FROM t ORDER BY id") == first
        assert results.hits == hits + 2
    finally:
        database.close()


def test_a_result_answers_lower_row_caps_and_a_cut_one_no_higher(backend, db):
    database = open_database(db, backend)
    try:
        hits = results.hits
        cut = database.query("SELECT id FROM t ORDER BY id", max_rows=2)
        assert cut == QueryResult(["id"], [(0,), (1,)], True)
        whole = database.query("SELECT id FROM t ORDER BY id", max_rows=10)  # runs: more rows
        assert whole == QueryResult(["id"], [(0,), (1,), (2,), (3,)], False)
        assert results.hits == hits
        assert database.query("SELECT id FROM t ORDER BY id", max_rows=3).rows == whole.rows[:3]
        assert database.query("SELECT id FROM t ORDER BY id", max_rows=3).truncated
        assert database.query("SELECT id FROM t ORDER BY id", max_rows=4) == whole
        assert database.query("SELECT id FROM t ORDER BY id", max_rows=50) == whole
        assert results.hits == hits + 4
    finally:
        database.close()


def test_a_cut_result_answers_its_own_cap():
    cache, runs = ResultCache(), _Runs()
    first = cache.submit(KEY, 1, 5.0, lambda: lambda: QueryResult(["n"], [(7,)], True))()
    assert cache.submit(KEY, 1, 5.0, runs)() == first
    assert cache.submit(KEY, 2, 5.0, runs)().rows == [(1,)] and runs.count == 1


def test_a_replaced_file_is_asked_again(backend, tmp_path):
    path = _write(tmp_path / "grows.sqlite", ["ada"])
    database = open_database(path, backend)
    try:
        assert database.query("SELECT COUNT(*) FROM t").rows == [(1,)]
    finally:
        database.close()
    _write(path, ["ada", "bo", "cy"])
    database = open_database(path, backend)
    try:
        assert database.query("SELECT COUNT(*) FROM t").rows == [(3,)]
    finally:
        database.close()


@pytest.mark.parametrize(
    ("dialect", "query"),
    [
        ("sqlite", "SELECT random()"),
        ("sqlite", "SELECT date('now')"),
        ("sqlite", "SELECT abs(RANDOM()) % 1000 FROM t"),
        ("duckdb", "SELECT uuid()"),
        ("duckdb", "SELECT gen_random_uuid()"),
        ("duckdb", "SELECT now()"),
        ("duckdb", "SELECT current_timestamp"),
        ("duckdb", "SELECT localtimestamp"),
        ("duckdb", "SELECT nextval('s')"),
    ],
)
def test_a_query_that_may_answer_differently_is_never_kept(dialect, query, db):
    assert ResultCache.key(dialect, db, query) is None
    assert ResultCache.key(dialect, db, "SELECT name FROM t WHERE name <> 'unknown'")


def test_random_values_are_drawn_again(backend, db):
    database = open_database(db, backend)
    try:
        draws = {database.query("SELECT random()").rows[0][0] for _ in range(3)}
        assert len(draws) == 3
    finally:
        database.close()


class _Runs:
    """A stand-in for a backend's query: counts its runs, takes ``seconds`` to answer."""

    def __init__(self, seconds: float = 0.0, fails: bool = False) -> None:
        self.count, self.seconds, self.fails = 0, seconds, fails

    def __call__(self):
        self.count += 1

        def result() -> QueryResult:
            time.sleep(self.seconds)
            if self.fails:
                raise SQLError("the query ran past the time limit of 1 s")
            return QueryResult(["n"], [(self.count,)])

        return result


KEY = ("sqlite", "x.sqlite", (1, 2, 3), "SELECT n")


def test_a_result_is_given_only_within_the_asking_time_limit():
    cache, runs = ResultCache(), _Runs(seconds=0.05)
    assert cache.submit(KEY, 10, 5.0, runs)().rows == [(1,)]
    assert cache.submit(KEY, 10, 0.01, runs)().rows == [(2,)]  # it took longer than 0.01 s
    assert cache.submit(KEY, 10, 5.0, runs)().rows == [(2,)]
    assert runs.count == 2


def test_failures_are_never_kept():
    cache, runs = ResultCache(), _Runs(fails=True)
    for _ in range(2):
        with pytest.raises(SQLError):
            cache.submit(KEY, 10, 5.0, runs)()
    assert runs.count == 2


def test_the_cache_holds_its_byte_budget():
    cache = ResultCache(capacity=2_100, largest=1_100)  # two entries of 8 + 1,000 bytes
    big = ResultCache(capacity=10_000, largest=1_000)

    def rows_of(size: int):
        return lambda: lambda: QueryResult(["s"], [("x" * size,)])

    big.submit(KEY, 10, 5.0, rows_of(1_001))()
    assert big.submit(KEY, 10, 5.0, _Runs())().rows == [(1,)]  # over ``largest``: not kept
    keys = [(*KEY[:3], f"SELECT {i}") for i in range(3)]
    for key in keys:
        cache.submit(key, 10, 5.0, rows_of(1_000))()
    assert cache.submit(keys[0], 10, 5.0, _Runs())().rows == [(1,)]  # the oldest went
    assert cache.submit(keys[2], 10, 5.0, _Runs())().rows == [("x" * 1_000,)]


def test_a_query_asked_while_it_runs_waits_for_that_run():
    cache, runs = ResultCache(), _Runs(seconds=0.3)
    with ThreadPoolExecutor(4) as threads:
        answers = list(threads.map(lambda _: cache.submit(KEY, 10, 5.0, runs)(), range(4)))
    assert runs.count == 1 and answers == [QueryResult(["n"], [(1,)])] * 4
    assert cache.hits == 3


def test_the_run_in_flight_shares_its_failure_only_under_the_same_limit():
    cache, runs = ResultCache(), _Runs(seconds=0.3, fails=True)
    first = cache.submit(KEY, 10, 5.0, runs)
    same, longer = cache.submit(KEY, 10, 5.0, runs), cache.submit(KEY, 10, 9.0, runs)
    for call in (first, same, longer):
        with pytest.raises(SQLError, match="time limit"):
            call()
    assert runs.count == 2  # the call under another limit ran its own


def test_a_run_whose_caller_never_asked_is_not_waited_for_twice():
    cache, runs = ResultCache(capacity=0), _Runs()  # nothing kept: each call runs or waits
    cache.submit(KEY, 10, 0.1, runs)  # its result is never taken
    started = time.monotonic()
    assert cache.submit(KEY, 10, 0.1, runs)().rows == [(2,)]
    assert 1.5 < time.monotonic() - started < 10.0  # waited for it, then ran its own
    started = time.monotonic()
    assert cache.submit(KEY, 10, 0.1, runs)().rows == [(3,)]
    assert time.monotonic() - started < 1.0  # the abandoned run was forgotten (a wait: 1.6 s)
