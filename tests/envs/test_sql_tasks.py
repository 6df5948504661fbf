"""The SQL family's tasks: a database per seed, and questions that are real at every level."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time

import numpy as np
import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

import sqlglot
from sqlglot import exp

import palaestra
from palaestra.envs.sql import databases
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.env import HELD_OUT_FIRST_SEED, PRESETS
from palaestra.envs.sql.questions import INTENTS, LEVELS, generate_question
from palaestra.verifiers.sql import SQLiteDatabase, connect_readonly, run_query
from palaestra.verifiers.sql_compare import results_match

DOMAIN_IDS = ["sql:Shop-v0", "sql:School-v0", "sql:Flights-v0", "sql:Hospital-v0", "sql:Library-v0"]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def table_rows(path) -> dict[str, int]:
    connection = connect_readonly(path)
    tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: connection.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_databases_are_deterministic_realistic_and_differ_by_seed(domain, tmp_path):
    first = database_path(domain, 3, tmp_path / "a")
    assert digest(first) == digest(database_path(domain, 3, tmp_path / "b"))
    other = database_path(domain, 4, tmp_path / "a")
    assert digest(first) != digest(other)
    sizes, other_sizes = table_rows(first), table_rows(other)
    assert len(sizes) >= 4 and max(sizes.values()) >= 1000 and min(sizes.values()) >= 8
    assert sizes != other_sizes  # table sizes change with the seed
    connection = connect_readonly(first)
    keys = [
        (table, row[2])
        for table in sizes
        for row in connection.execute(f"PRAGMA foreign_key_list({table})")
    ]
    assert len(keys) >= 3
    assert sqlite3.connect(first).execute("PRAGMA foreign_key_check").fetchall() == []
    text = " ".join(
        str(v)
        for t in sizes
        for row in connection.execute(f"SELECT * FROM {t} LIMIT 300")
        for v in row
    )
    assert "'" in text and any(ord(ch) > 127 for ch in text) and "None" in text


def test_the_database_cache_is_bounded_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setattr(databases, "MAX_CACHED_DATABASES", 3)
    for seed in range(3):
        database_path("school", seed, tmp_path)
    database_path("school", 0, tmp_path)  # used again: now the most recent
    for seed in (3, 4):
        database_path("school", seed, tmp_path)
    kept = sorted(p.name for p in tmp_path.glob("*.sqlite"))
    assert kept == [f"school-seed{s}-v{databases.GENERATOR_VERSION}.sqlite" for s in (0, 3, 4)]


def test_the_cache_never_deletes_a_database_in_use(tmp_path, monkeypatch):
    monkeypatch.setattr(databases, "MAX_CACHED_DATABASES", 1)
    held = SQLiteDatabase(database_path("school", 0, tmp_path))
    try:
        for seed in (1, 2):
            database_path("school", seed, tmp_path)
        assert held.path.is_file()  # the least recently used, but open
        assert held.query("SELECT COUNT(*) FROM teachers").rows[0][0] > 0
    finally:
        held.close()
    database_path("school", 3, tmp_path)
    assert not held.path.exists()  # closed: evicted like any other


def test_using_a_database_leaves_its_modification_time(tmp_path):
    path = database_path("shop", 0, tmp_path)
    before = path.stat()
    time.sleep(0.01)
    assert database_path("shop", 0, tmp_path) == path
    after = path.stat()
    assert after.st_mtime_ns == before.st_mtime_ns  # a DuckDB copy keyed on it stays loaded
    assert after.st_atime_ns > before.st_atime_ns  # the cache's recency


def test_each_seed_draws_its_own_database_and_eval_seeds_are_held_out():
    env = palaestra.make("sql:Shop-v0")

    def database_seed(seed):
        env.reset(seed=seed)
        return int(re.search(r"seed(\d+)", env.unwrapped.db_path.name).group(1))

    assert [database_seed(s) for s in (5, 6, 5)] == [5, 6, 5]
    assert database_seed(HELD_OUT_FIRST_SEED + 7) == HELD_OUT_FIRST_SEED + 7
    env.reset()
    assert int(re.search(r"seed(\d+)", env.unwrapped.db_path.name).group(1)) < HELD_OUT_FIRST_SEED
    pinned = palaestra.make("sql:Shop-v0", db_seed=0)
    names = set()
    for seed in (1, 2, HELD_OUT_FIRST_SEED):
        pinned.reset(seed=seed)
        names.add(pinned.unwrapped.db_path.name)
    assert len(names) == 1


def test_a_replayed_seed_is_the_same_episode_and_leaves_the_rng_as_a_fresh_draw_would():
    replayed, fresh = palaestra.make("sql:Mixed-v0"), palaestra.make("sql:Mixed-v0")
    first = replayed.reset(seed=5)[0]
    assert replayed.reset(seed=5)[0] == first == fresh.reset(seed=5)[0]
    assert replayed.reset()[0] == fresh.reset()[0]  # the unseeded draw after it agrees
    assert replayed.unwrapped.problem.data["db_seed"] < HELD_OUT_FIRST_SEED


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_every_gold_query_runs_and_returns_rows(domain):
    for seed in range(2):
        connection = connect_readonly(database_path(domain, seed))
        rng = np.random.default_rng(seed)
        for name in INTENTS[domain]:
            for _ in range(2):
                question = generate_question(domain, connection, rng, intents=[name])
                rows = run_query(connection, question.gold_sql).rows
                assert rows and not (len(rows) == 1 and set(rows[0]) <= {None, 0}), question


def _constructs(sql: str) -> set[str]:
    """Node types of the parsed query, plus SelfJoin (a table twice) and RealNesting
    (subqueries two deep, or one that reads a column of the query around it)."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    found = {type(node).__name__ for node in tree.walk()}
    tables = [t.name for t in tree.find_all(exp.Table)]
    if len(tables) != len(set(tables)):
        found.add("SelfJoin")
    for sub in tree.find_all(exp.Subquery):
        inner = {t.alias_or_name for t in sub.find_all(exp.Table)}
        outer = {c.table for c in sub.find_all(exp.Column) if c.table}
        if sub.find(exp.Subquery) is not None or outer - inner:
            found.add("RealNesting")
    return found


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_levels_are_real_and_every_construct_is_asked_for(domain):
    seen = set()
    for name, intent in INTENTS[domain].items():
        found = _constructs(intent.gold)
        seen |= found
        tables = {t.name for t in sqlglot.parse_one(intent.gold, read="sqlite").find_all(exp.Table)}
        if intent.level == 1:
            assert len(tables) == 1 and "Group" not in found, name
        elif intent.level == 2:
            assert "Join" in found and "Group" not in found and "Window" not in found, name
        elif intent.level == 3:
            assert "Group" in found and "Window" not in found and "Subquery" not in found, name
        elif intent.level == 4:
            assert found & {"RealNesting", "Except", "Intersect", "Union"}, name
            assert "Window" not in found, name
        else:
            assert "Window" in found, name
    assert {"Case", "Like", "Except", "Intersect", "Having", "SelfJoin"} <= seen, domain
    assert {intent.level for intent in INTENTS[domain].values()} == set(LEVELS)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_parameter_free_questions_are_at_most_a_tenth_of_draws(domain):
    for levels in PRESETS.values():
        intents = [i for i in INTENTS[domain].values() if i.level in levels]
        free = sum(not intent.params for intent in intents)
        assert free / len(intents) <= 0.10, (domain, levels)


def test_phrasings_do_not_spell_out_the_sql():
    keywords = re.compile(
        r"\b(SELECT|JOIN|GROUP BY|HAVING|RANK|DENSE_RANK|ROW_NUMBER|LAG|OVER|PARTITION|"
        r"INTERSECT|EXCEPT|UNION|LIKE|CASE|DISTINCT|COUNT|AVG|SUM)\b"
    )
    for domain, intents in INTENTS.items():
        for name, intent in intents.items():
            assert len(intent.phrasings) >= 2, (domain, name)
            for text in intent.phrasings:
                assert not keywords.search(text), (domain, name, text)


def _could_repeat(gold: str, connection) -> bool:
    """Whether a plain selection (no grouping, window or set operation) repeats rows once
    its filter and DISTINCT are dropped: then its rows may repeat for some parameters."""
    tree = sqlglot.parse_one(gold, read="sqlite")
    if not isinstance(tree, exp.Select) or tree.find(exp.Group, exp.Window, exp.AggFunc):
        return False
    tree = tree.copy()
    tree.set("where", None)
    tree.set("distinct", None)
    rows = connection.execute(tree.sql(dialect="sqlite")).fetchall()
    return len(set(rows)) < len(rows)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_questions_state_the_duplicate_convention_where_it_matters(domain):
    markers = ("one row per", "once", "distinct", "one row each")
    connections = [connect_readonly(database_path(domain, seed)) for seed in range(3)]
    for name, intent in INTENTS[domain].items():
        repeats = "DISTINCT" in intent.gold.upper().split("FROM")[0]  # duplicates were removed
        for seed, connection in enumerate(connections):
            question = generate_question(
                domain, connection, np.random.default_rng(seed), intents=[name]
            )
            rows = run_query(connection, question.gold_sql).rows
            repeats |= len(set(rows)) < len(rows) or _could_repeat(question.gold_sql, connection)
        if repeats:
            for text in intent.phrasings:
                assert any(marker in text.lower() for marker in markers), (domain, name, text)


@pytest.mark.slow
@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_at_least_300_distinct_gold_queries_per_2000_draws_on_one_database(domain):
    connection = connect_readonly(database_path(domain, 0))
    rng = np.random.default_rng(0)
    golds = {generate_question(domain, connection, rng).gold_sql for _ in range(2000)}
    assert len(golds) >= 300, len(golds)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_many_distinct_gold_queries_on_one_database(domain):
    connection = connect_readonly(database_path(domain, 0))
    rng = np.random.default_rng(1)
    golds = {generate_question(domain, connection, rng).gold_sql for _ in range(200)}
    assert len(golds) >= 120, len(golds)


def _answer_as_values(rows) -> str:
    """A memorised answer: the rows as a VALUES literal."""

    def literal(v):
        return (
            "NULL"
            if v is None
            else repr(v)
            if isinstance(v, int | float)
            else "'" + str(v).replace("'", "''") + "'"
        )

    return "VALUES " + ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


def _memoriser_success(env, train: range, test: range) -> float:
    """Learn question text -> answer on ``train`` seeds (the oracle's results), answer
    the same text on ``test`` seeds from memory; the share of test episodes won."""
    memory = {}
    for seed in train:
        prompt, _ = env.reset(seed=seed)
        memory[prompt.rsplit("Question: ", 1)[-1]] = _answer_as_values(env.unwrapped.gold().rows)
    wins = asked = 0
    for seed in test:
        prompt, _ = env.reset(seed=seed)
        answer = memory.get(prompt.rsplit("Question: ", 1)[-1])
        if answer is not None:
            asked += 1
            wins += env.step(f"<solution>{answer}</solution>")[1] == 1.0
    return wins / max(asked, 1), asked


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_an_answer_never_carries_over_to_another_database(domain):
    connections = [connect_readonly(database_path(domain, seed)) for seed in range(3)]
    for name in INTENTS[domain]:
        rng = np.random.default_rng(0)
        question = generate_question(domain, connections[0], rng, intents=[name])
        answer = run_query(connections[0], question.gold_sql).rows
        for other in connections[1:]:  # the same question asked of another seed's database
            assert not results_match(run_query(other, question.gold_sql).rows, answer), name


@pytest.mark.slow
def test_a_memorising_policy_wins_on_one_database_and_not_across_seeds():
    train, held_out = range(300), range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + 300)
    pinned = palaestra.make("sql:Flights-Easy-v0", db_seed=0, suite=0, fuzzed=0)
    rate, asked = _memoriser_success(pinned, train, held_out)
    assert asked >= 20 and rate >= 0.8  # one database, no test suite: memorised answers win
    rate, asked = _memoriser_success(palaestra.make("sql:Flights-Easy-v0"), train, held_out)
    assert asked >= 20 and rate == 0.0, (rate, asked)
    pinned = palaestra.make("sql:Flights-Easy-v0", db_seed=0)  # graded on the suite too
    rate, asked = _memoriser_success(pinned, train, held_out)
    assert asked >= 20 and rate == 0.0, (rate, asked)


@pytest.mark.parametrize("domain", ["Shop", "Library"])
def test_the_test_suite_fails_an_answer_right_only_on_the_episode_database(domain):
    for suite, expected in [(0, 1.0), (2, 0.0)]:
        env = palaestra.make(f"sql:{domain}-v0", suite=suite, fuzzed=0)
        for seed in range(4):
            env.reset(seed=seed)
            paths = env.unwrapped.suite_paths()
            assert len(paths) in (0, suite) and env.unwrapped.db_path not in paths
            memorised = _answer_as_values(env.unwrapped.gold().rows)
            assert env.step(f"<solution>{memorised}</solution>")[1] == expected, seed
            env.reset(seed=seed)
            assert env.step(env.oracle()(""))[1] == 1.0


@pytest.mark.parametrize("env_id", DOMAIN_IDS)
def test_scripted_cheaters_score_zero(env_id):
    env = palaestra.make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        database = env.unwrapped.sqlite()
        cheats = ["SELECT 1 WHERE 0", "SELECT NULL", "SELECT 0", "SELECT 793"]  # empty, constants
        for table in database.tables():  # everything, and every column's values
            columns = {line.split()[0] for line in database.describe(table).splitlines()}
            cheats.append(f"SELECT * FROM {table}")
            cheats += [f"SELECT {c} FROM {table}" for c in sorted(columns)]
            cheats += [f"SELECT DISTINCT {c} FROM {table}" for c in sorted(columns)]
        for cheat in cheats:
            env.reset(seed=seed)
            assert env.step(f"<solution>{cheat}</solution>")[1] == 0.0, (env_id, seed, cheat)
