"""Test-suite grading: an answer must be right on more databases of the same schema than
the episode's own (Zhong et al. 2020), so a near miss the episode's data has no witness
for still scores 0, and an equivalent rewrite still scores 1."""

from __future__ import annotations

import sqlite3
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
