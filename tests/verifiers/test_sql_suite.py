"""Test-suite grading: an answer must be right on more databases of the same schema than
the episode's own (Zhong et al. 2020), so a near miss the episode's data has no witness
for still scores 0, and an equivalent rewrite still scores 1."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.verifiers.sql import default_golds, execution_match

SCHEMA = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score INTEGER);"


def _database(path: Path, rows: list[tuple[int, str, int]]) -> Path:
    connection = sqlite3.connect(path)
    connection.execute(SCHEMA)
    connection.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    connection.commit()
    connection.close()
    return path


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("suite")
    # the episode's database: names all differ, no score equals 50
    episode = _database(folder / "episode.sqlite", [(1, "Ana", 40), (2, "Bo", 60), (3, "Cy", 70)])
    suite = [
        _database(folder / "dupes.sqlite", [(1, "Ana", 40), (2, "Ana", 60), (3, "Di", 20)]),
        _database(folder / "bound.sqlite", [(1, "Ed", 50), (2, "Flo", 90), (3, "Gus", 90)]),
    ]
    return episode, suite


@pytest.mark.parametrize(
    ("gold", "near_miss"),
    [
        ("SELECT name FROM t", "SELECT DISTINCT name FROM t"),
        ("SELECT name FROM t WHERE score >= 50", "SELECT name FROM t WHERE score > 50"),
        ("SELECT COUNT(*) FROM t WHERE score >= 50", "SELECT 2"),  # a memorised answer
        ("SELECT name FROM t WHERE score > 50", "SELECT name FROM t WHERE id >= 2"),
    ],
)
def test_a_near_miss_without_a_witness_scores_0_on_the_suite(databases, gold, near_miss):
    episode, suite = databases
    assert execution_match(near_miss, gold, episode) == 1.0  # no witness on this data
    assert execution_match(near_miss, gold, episode, suite=suite) == 0.0


@pytest.mark.parametrize(
    ("gold", "rewrite"),
    [
        ("SELECT name FROM t", "SELECT t.name FROM t AS t ORDER BY id DESC"),
        ("SELECT name FROM t WHERE score >= 50", "SELECT name FROM t WHERE NOT score < 50"),
        ("SELECT COUNT(*) FROM t WHERE score >= 50", "SELECT SUM(score >= 50) FROM t"),
        (
            "SELECT name, score FROM t ORDER BY score DESC, id",
            "SELECT name, score FROM t ORDER BY score DESC",
        ),  # ties in the gold's order (90, 90) may come either way
    ],
)
def test_an_equivalent_rewrite_still_scores_1(databases, gold, rewrite):
    episode, suite = databases
    assert execution_match(rewrite, gold, episode, suite=suite) == 1.0


def test_a_gold_with_limit_is_judged_on_the_episode_database_only(databases):
    episode, suite = databases
    gold = "SELECT name FROM t ORDER BY score DESC LIMIT 1"  # Flo and Gus tie in 'bound'
    assert execution_match("SELECT name FROM t WHERE score = 70", gold, episode, suite=suite) == 1.0


def test_gold_results_are_cached_per_database_and_query(databases):
    _, suite = databases
    golds = default_golds()
    first = golds.gold(suite[0], "SELECT name FROM t", timeout=5.0, max_rows=100)
    assert golds.gold(suite[0], "SELECT name FROM t", timeout=5.0, max_rows=100) is first
    assert golds.gold(suite[1], "SELECT name FROM t", timeout=5.0, max_rows=100) is not first


def test_duckdb_answers_are_graded_on_the_suite_too(databases):
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    episode, suite = databases
    gold, near_miss = "SELECT name FROM t", "SELECT DISTINCT name FROM t"
    assert execution_match(near_miss, gold, episode, backend="duckdb") == 1.0
    assert execution_match(near_miss, gold, episode, suite=suite, backend="duckdb") == 0.0
    assert execution_match(gold, gold, episode, suite=suite, backend="duckdb") == 1.0


# -- fuzzed copies of a generated database (palaestra.envs.sql.suite) -----------------------

NEAR_MISSES = [
    # a missing DISTINCT where no two customers of the city share a name
    ("shop", "SELECT name FROM customers WHERE city = 'Perth'",
     "SELECT DISTINCT name FROM customers WHERE city = 'Perth'"),
    ("hospital", "SELECT name FROM patients WHERE city = 'Osaka'",
     "SELECT DISTINCT name FROM patients WHERE city = 'Osaka'"),
    # > for >= (and back) where no row sits on the bound
    ("flights", "SELECT id FROM flights WHERE origin = 'NBO' AND price >= 700",
     "SELECT id FROM flights WHERE origin = 'NBO' AND price > 700"),
    ("flights", "SELECT id FROM flights WHERE origin = 'GRU' AND duration_min <= 300",
     "SELECT id FROM flights WHERE origin = 'GRU' AND duration_min < 300"),
    ("shop", "SELECT name, CASE WHEN price < 100 THEN 'budget' ELSE 'premium' END "
     "FROM products WHERE category = 'sports'",
     "SELECT name, CASE WHEN price <= 100 THEN 'budget' ELSE 'premium' END "
     "FROM products WHERE category = 'sports'"),
    ("hospital", "SELECT COUNT(*) FROM visits v JOIN patients p ON p.id = v.patient_id "
     "WHERE p.city = 'Perth' AND v.cost > 450",
     "SELECT COUNT(*) FROM visits v JOIN patients p ON p.id = v.patient_id "
     "WHERE p.city = 'Perth' AND v.cost >= 450"),
    ("library", "SELECT id, name FROM members WHERE city = 'Córdoba' AND joined >= '2019-01-01'",
     "SELECT id, name FROM members WHERE city = 'Córdoba' AND joined > '2019-01-01'"),
    # a year or month bound that leaves out its first or last day
    ("library", "SELECT id FROM loans WHERE member_id = 17 AND strftime('%Y', loan_date) = '2023'",
     "SELECT id FROM loans WHERE member_id = 17 AND loan_date > '2023-01-01' "
     "AND loan_date < '2023-12-31'"),
    ("shop", "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
     "WHERE c.city = 'Zürich' AND strftime('%Y-%m', o.order_date) = '2022-06'",
     "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
     "WHERE c.city = 'Zürich' AND o.order_date > '2022-06-01' AND o.order_date < '2022-06-30'"),
    # a day's departures after midnight: BETWEEN ... '2024-03-31' stops at 00:00 that day
    ("flights", "SELECT id FROM flights WHERE origin = 'KRK' "
     "AND strftime('%Y-%m', departure) = '2024-03'",
     "SELECT id FROM flights WHERE origin = 'KRK' "
     "AND departure BETWEEN '2024-03-01' AND '2024-03-31'"),
]  # fmt: skip
REWRITES = [
    (NEAR_MISSES[0][1], "SELECT c.name FROM customers c WHERE c.city = 'Perth' ORDER BY c.id DESC"),
    (NEAR_MISSES[2][1], "SELECT id FROM flights WHERE origin = 'NBO' AND NOT price < 700"),
    (NEAR_MISSES[3][1], "SELECT id FROM flights WHERE origin = 'GRU' AND duration_min < 301"),
    (NEAR_MISSES[4][1], "SELECT name, CASE WHEN price >= 100 THEN 'premium' ELSE 'budget' END "
                        "FROM products WHERE category = 'sports'"),
    (NEAR_MISSES[6][1], "SELECT id, name FROM members WHERE city = 'Córdoba' "
                        "AND joined > '2018-12-31'"),
    (NEAR_MISSES[7][1], "SELECT id FROM loans WHERE member_id = 17 "
                        "AND loan_date BETWEEN '2023-01-01' AND '2023-12-31'"),
    (NEAR_MISSES[8][1], "SELECT o.id FROM orders o WHERE o.customer_id IN (SELECT id FROM "
                        "customers WHERE city = 'Zürich') AND o.order_date >= '2022-06-01' "
                        "AND o.order_date < '2022-07-01'"),
]  # fmt: skip
DOMAIN_OF = {gold: domain for domain, gold, _ in NEAR_MISSES}


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> dict[str, Path]:
    """Each domain's database of seed 0, in a folder of its own (its fuzzed copies too)."""
    from palaestra.envs.sql.databases import database_path

    folder = tmp_path_factory.mktemp("generated")
    return {domain: database_path(domain, 0, folder) for domain in {d for d, *_ in NEAR_MISSES}}


@pytest.mark.parametrize(("domain", "gold", "near_miss"), NEAR_MISSES)
def test_fuzzed_copies_catch_a_near_miss_the_episode_database_has_no_witness_for(
    episodes, domain, gold, near_miss
):
    from palaestra.envs.sql.env import DEFAULT_FUZZED
    from palaestra.envs.sql.suite import grading_suite

    episode = episodes[domain]
    assert execution_match(near_miss, gold, episode) == 1.0  # no witness on this data
    fuzzed = grading_suite(domain, episode, gold, seeds=0, fuzzed=DEFAULT_FUZZED)
    assert fuzzed and execution_match(near_miss, gold, episode, suite=fuzzed) == 0.0
    assert execution_match(gold, gold, episode, suite=fuzzed) == 1.0  # the oracle still wins


@pytest.mark.parametrize(("gold", "rewrite"), REWRITES)
def test_equivalent_rewrites_still_score_1_on_the_fuzzed_copies(episodes, gold, rewrite):
    from palaestra.envs.sql.env import DEFAULT_FUZZED
    from palaestra.envs.sql.suite import grading_suite

    domain = DOMAIN_OF[gold]
    fuzzed = grading_suite(domain, episodes[domain], gold, seeds=0, fuzzed=DEFAULT_FUZZED)
    assert execution_match(rewrite, gold, episodes[domain], suite=fuzzed) == 1.0


def test_duckdb_answers_are_graded_on_the_fuzzed_copies_too(episodes):
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    from palaestra.envs.sql.suite import fuzzed_paths

    domain, gold, near_miss = NEAR_MISSES[2]
    fuzzed = fuzzed_paths(episodes[domain], gold, 2)
    for answer, expected in [(near_miss, 0.0), (gold, 1.0), (REWRITES[1][1], 1.0)]:
        got = execution_match(answer, gold, episodes[domain], suite=fuzzed, backend="duckdb")
        assert got == expected, answer


def _rows(path: Path, sql: str) -> list[tuple]:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def test_a_fuzzed_copy_moves_rows_near_the_gold_and_keeps_keys_and_invariants(episodes):
    from palaestra.envs.sql.suite import fuzzed_path

    gold = NEAR_MISSES[8][1]  # orders of Zürich's customers in June 2022
    source = episodes["shop"]
    copy = fuzzed_path(source, gold, 0)
    assert copy.parent == source.parent / "fuzzed" and copy.stat().st_mode & 0o222 == 0
    month_ends = "SELECT COUNT(*) FROM orders WHERE order_date IN ('2022-06-01', '2022-06-30')"
    assert _rows(copy, month_ends)[0][0] > _rows(source, month_ends)[0][0]
    for keys in [
        "SELECT id, customer_id FROM orders ORDER BY rowid",
        "SELECT order_id, product_id FROM order_items ORDER BY rowid",
        "SELECT id, referred_by FROM customers ORDER BY rowid",
    ]:
        assert _rows(copy, keys) == _rows(source, keys)
    assert _rows(copy, "SELECT COUNT(*) FROM orders WHERE order_date IS NULL") == [(0,)]
    unit_price = (  # an order line's unit price is still its product's price
        "SELECT COUNT(*) FROM order_items i JOIN products p ON p.id = i.product_id "
        "WHERE i.unit_price <> p.price"
    )
    assert _rows(copy, unit_price) == [(0,)]
    loans = fuzzed_path(episodes["library"], NEAR_MISSES[7][1], 1)
    late = "SELECT COUNT(*) FROM loans WHERE return_date <= loan_date"
    assert _rows(loans, late) == [(0,)]  # a moved loan's return moved with it


def test_fuzzed_copies_are_cached_and_the_same_from_any_process(episodes, tmp_path):
    from palaestra.envs.sql.databases import database_path
    from palaestra.envs.sql.suite import fuzzed_path

    gold = NEAR_MISSES[2][1]
    first = fuzzed_path(episodes["flights"], gold, 0)
    stamp = first.stat().st_mtime_ns
    assert fuzzed_path(episodes["flights"], gold, 0) == first
    assert first.stat().st_mtime_ns == stamp  # reused, not rebuilt
    elsewhere = fuzzed_path(database_path("flights", 0, tmp_path), gold, 0)
    every_row = "SELECT * FROM flights ORDER BY id"
    assert _rows(elsewhere, every_row) == _rows(first, every_row)
    assert _rows(fuzzed_path(episodes["flights"], gold, 1), every_row) != _rows(first, every_row)


def test_the_env_grades_on_fuzzed_copies_by_default():
    import palaestra
    from palaestra.envs.sql.env import DEFAULT_FUZZED, DEFAULT_SUITE

    assert DEFAULT_FUZZED >= 1
    env = palaestra.make("sql:Shop-v0")
    for seed in range(4):
        env.reset(seed=seed)
        paths = env.unwrapped.suite_paths()
        if paths:  # none for a gold with LIMIT
            fuzzed = [path for path in paths if path.parent.name == "fuzzed"]
            assert len(paths) == DEFAULT_SUITE + DEFAULT_FUZZED and len(fuzzed) == DEFAULT_FUZZED
        assert env.step(env.oracle()(""))[1] == 1.0
    env.close()


@pytest.mark.slow
def test_every_labelled_equivalent_rewrite_scores_1_on_the_default_grading_suite():
    from palaestra.envs.sql.databases import database_path
    from palaestra.envs.sql.env import DEFAULT_FUZZED, DEFAULT_SUITE
    from palaestra.envs.sql.suite import grading_suite
    from tests.verifiers.test_sql_labelled_pairs import SAME_PAIRS

    for domain, gold, rewrite in SAME_PAIRS:
        for seed in (0, 1):
            path = database_path(domain, seed)
            suite = grading_suite(domain, path, gold, seeds=DEFAULT_SUITE, fuzzed=DEFAULT_FUZZED)
            assert execution_match(rewrite, gold, path, suite=suite) == 1.0, (seed, rewrite)


def test_checks_on_threads_survive_their_files_being_replaced(tmp_path):
    """A suite file rebuilt (a new version) while other threads grade on it: the database a
    check uses stays open until the check ends."""
    path = tmp_path / "swapped.sqlite"

    def write() -> None:
        temporary = tmp_path / "swapped.tmp"
        temporary.unlink(missing_ok=True)
        connection = sqlite3.connect(temporary)
        connection.execute("CREATE TABLE t (name TEXT, score INTEGER)")
        connection.executemany("INSERT INTO t VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 2)])
        connection.commit()
        connection.close()
        os.replace(temporary, path)

    write()
    gold = "SELECT name FROM t ORDER BY score DESC"
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.is_set():
            write()
            time.sleep(0.002)

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        with ThreadPoolExecutor(4) as threads:
            scores = list(
                threads.map(
                    lambda i: execution_match(
                        f"SELECT name FROM t ORDER BY score DESC, name DESC /* {i} */",
                        gold,
                        path,
                        suite=[path],
                    ),
                    range(300),
                )
            )
    finally:
        stop.set()
        writer.join()
    assert scores == [1.0] * 300
