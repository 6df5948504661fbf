"""The SQL family: generated databases and questions, envs, tools, loaders and attacks."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np
import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

import palaestra
from palaestra.core.tool_calls import ToolCall, tool_format
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.dataset import SQLDataset
from palaestra.envs.sql.env import MAX_OBSERVATION_CHARS, SQLToolEnv, extract_sql
from palaestra.testing import check_env, play
from palaestra.verifiers.sql import (
    SQLiteDatabase,
    execution_match,
    open_database,
)
from palaestra.verifiers.sql_results import results

SQL_IDS = [
    "sql:Shop-v0",
    "sql:School-Easy-v0",
    "sql:Flights-Hard-v0",
    "sql:Hospital-v0",
    "sql:Library-v0",
    "sql:Mixed-v0",
    "sql:Spider-v0",
    "sql:Mixed-Tools-v0",
    "sql:Mixed-SQLTag-v0",
    "sql:Spider-Tools-v0",
]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_levels_follow_the_difficulty():
    for env_id, allowed in [("sql:Mixed-Hard-v0", {4, 5}), ("sql:Mixed-Easy-v0", {1, 2})]:
        env = palaestra.make(env_id)
        levels = set()
        for seed in range(30):
            env.reset(seed=seed)
            levels.add(env.unwrapped.problem.data["level"])
        assert levels == allowed, env_id


@pytest.mark.parametrize("env_id", SQL_IDS)
def test_contract_and_oracle(env_id):
    check_env(env_id)
    env = palaestra.make(env_id)
    for seed in range(10):
        transcript = play(env, seed)
        assert transcript[-1][5] is True, (env_id, seed)
        assert transcript[-1][2] == 1.0


def test_same_seed_same_episode():
    a, b = palaestra.make("sql:Mixed-v0"), palaestra.make("sql:Mixed-v0")
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0]


def test_answers_are_read_from_tags_fences_or_bare_queries():
    assert extract_sql("think\n<solution>SELECT 1</solution>") == "SELECT 1"
    assert extract_sql("```sql\nSELECT 1\n```\nand finally\n```sql\nSELECT 2;\n```") == "SELECT 2;"
    assert extract_sql("select name from t;") == "select name from t"
    assert extract_sql("The answer is 42") is None
    assert extract_sql("<solution> </solution>") is None


def test_rewards_execution_and_skyrl():
    env = palaestra.make("sql:Shop-v0")
    env.reset(seed=0)
    assert env.step("no query here")[1] == 0.0
    skyrl = palaestra.make("sql:Shop-v0", reward="skyrl")
    assert skyrl.reward_range == (-1.0, 1.0)
    for action, reward in [
        ("no query here", -1.0),
        ("<solution>SELECT 1</solution>", -1.0),  # no <think>
        ("<think>t</think><solution>SELEC 1</solution>", 0.0),  # a syntax error is wrong
        ("<think>t</think><solution>SELECT 12345</solution>", 0.0),
        ("<think>t</think><solution>SELECT * FROM nowhere</solution>", 0.0),
    ]:
        skyrl.reset(seed=0)
        observation, got, terminated, *_ = skyrl.step(action)
        assert (got, terminated) == (reward, True), (action, observation)
    with pytest.raises(ValueError, match="unknown reward"):
        palaestra.make("sql:Shop-v0", reward="vibes")


def test_retry_gives_execution_feedback():
    env = palaestra.make("sql:Shop-Retry-v0")
    env.reset(seed=1)
    observation, _, terminated, *_ = env.step("<solution>SELECT * FROM nowhere</solution>")
    assert not terminated and "no such table" in observation and "Try again" in observation


def test_retry_costs_each_extra_attempt():
    env = palaestra.make("sql:Shop-Retry-v0")
    wrong = "<solution>SELECT 1</solution>"
    for misses, reward in [(0, 1.0), (1, 0.9), (2, 0.8)]:
        env.reset(seed=2)
        right = env.unwrapped.format_answer(env.unwrapped.problem.answer)
        for _ in range(misses):
            assert env.step(wrong)[1] == 0.0
        _, got, terminated, _, info = env.step(right)
        assert terminated and info["success"] and got == pytest.approx(reward)
    env.reset(seed=2)
    assert [env.step(wrong)[1] for _ in range(3)] == [0.0, 0.0, 0.0]  # never below the floor
    free = palaestra.make("sql:Shop-v0", max_attempts=3)  # the cost is the variant's choice
    free.reset(seed=2)
    free.step(wrong)
    assert free.step(free.unwrapped.format_answer(free.unwrapped.problem.answer))[1] == 1.0
    with pytest.raises(ValueError, match="attempt_cost"):
        palaestra.make("sql:Shop-v0", attempt_cost=-0.1)


def test_attacks_through_the_env_leave_every_database_unchanged():
    env = palaestra.make("sql:Shop-Tools-v0", timeout=0.5)
    env.reset(seed=0)
    path = env.unwrapped.db_path
    before = digest(path)
    hermes = tool_format("hermes")
    for attack in [
        "DELETE FROM orders",
        "DROP TABLE customers",
        "ATTACH DATABASE 'x.db' AS x",
        "PRAGMA writable_schema = 1",
        "UPDATE products SET price = 0",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT COUNT(*) FROM c",
    ]:
        observation, _, terminated, _, info = env.step(
            hermes.format(ToolCall("sql", {"query": attack}), env.tools)
        )
        assert info["role"] == "tool" and observation.startswith("error") and not terminated, attack
        env.reset(seed=0)
    env.step("<solution>DELETE FROM orders</solution>")
    assert digest(path) == before


def test_exploration_tools():
    env = SQLToolEnv(palaestra.make("sql:Library-v0"), explore_rows=3)
    env.reset(seed=0)
    hermes = tool_format("hermes")
    call = lambda name, **args: env.step(hermes.format(ToolCall(name, args), env.tools))[0]  # noqa: E731
    assert call("list_tables").split("\n") == ["authors", "books", "loans", "members"]
    described = call("describe_table", table="loans")
    assert "return_date DATE" in described and "book_id REFERENCES books(id)" in described
    assert call("describe_table", table="nope").startswith("error: describe_table: no table 'nope'")
    rows = call("sql", query="SELECT id FROM books ORDER BY id")
    assert rows.split("\n") == ["id", "1", "2", "3", "(only the first 3 rows are shown)"]
    assert call("sql", query="SELECT name FROM books WHERE (").startswith(
        "error: sql: syntax error"
    )


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
def test_an_answer_the_agent_already_ran_is_graded_without_running_again(backend):
    if backend == "duckdb":
        pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = palaestra.make("sql:Mixed-Tools-v0", backend=backend)
    for seed in range(40):  # a question whose answer fits the tool's rows
        env.reset(seed=seed)
        query = env.unwrapped.oracle_query()
        if len(env.unwrapped.query(query).rows) <= 20:
            break
    results.clear()  # what the search above ran
    hermes = tool_format("hermes")
    env.step(hermes.format(ToolCall("sql", {"query": query}), env.tools))  # its first 20 rows
    hits = results.hits
    _, reward, terminated, _, _ = env.step(f"<solution>{query}</solution>")
    assert terminated and reward == 1.0 and results.hits == hits + 1


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
def test_sql_tool_observations_are_bounded_whatever_the_query_returns(backend):
    if backend == "duckdb":
        pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = SQLToolEnv(palaestra.make("sql:Shop-v0", backend=backend), explore_rows=50)
    env.reset(seed=0)
    hermes = tool_format("hermes")
    text = "hex(zeroblob(40000))" if backend == "sqlite" else "repeat('x', 80000)"
    wide = f"SELECT {text}, c.* FROM customers c"  # 80 KB a row, 50 rows
    observation = env.step(hermes.format(ToolCall("sql", {"query": wide}), env.tools))[0]
    assert len(observation) <= MAX_OBSERVATION_CHARS + 200
    assert "(80,000 characters)" in observation and "too long" in observation


def test_sql_tag_variant_explores_with_sql_tags():
    env = palaestra.make("sql:School-SQLTag-v0")
    env.reset(seed=0)
    assert "<sql>" in env.system_prompt and "<solution>" in env.system_prompt
    students = env.unwrapped.sqlite().query("SELECT COUNT(*) FROM students").rows[0][0]
    observation, _, _, _, info = env.step("<sql>SELECT COUNT(*) FROM students</sql>")
    assert info["role"] == "tool" and f"\n{students}</observation>" in observation


def test_a_solution_inside_reasoning_does_not_end_an_exploring_turn():
    env = palaestra.make("sql:School-SQLTag-v0")
    env.reset(seed=0)
    gold = env.unwrapped.oracle_query()
    explore = "<sql>SELECT COUNT(*) FROM students</sql>"
    for reasoning in (f"<think>maybe <solution>{gold}</solution></think>", "<think>unclosed, "):
        action = reasoning + explore if "</think>" in reasoning else explore + reasoning + gold
        *_, terminated, _, info = env.step(action)
        assert not terminated and info["role"] == "tool", action
    *_, terminated, _, _ = env.step(f"<think>done</think><solution>{gold}</solution>{explore}")
    assert terminated


def test_spider_and_bird_files(tmp_path):
    env = palaestra.make("sql:Spider-v0")
    assert env.unwrapped.problem_count == 12
    assert "CREATE TABLE singer" in env.reset(options={"index": 0})[0]
    bird = tmp_path / "dev.json"
    folder = tmp_path / "db" / "mini"
    folder.mkdir(parents=True)
    connection = sqlite3.connect(folder / "mini.sqlite")
    connection.executescript("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    connection.commit()
    connection.close()
    bird.write_text(
        json.dumps(
            [
                {
                    "question_id": 7,
                    "db_id": "mini",
                    "question": "Sum of a?",
                    "evidence": "a is a number",
                    "SQL": "SELECT SUM(a) FROM t",
                }
            ]
        )
    )
    env = SQLDataset(bird, tmp_path / "db")
    prompt, info = env.reset(seed=0)
    assert "Hint: a is a number" in prompt and info["problem_id"] == "7"
    assert env.step("<solution>SELECT 6</solution>")[1] == 1.0
    with pytest.raises(ValueError, match="invalid db_id"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps([{"db_id": "../etc", "question": "q", "query": "SELECT 1"}]))
        SQLDataset(bad, tmp_path / "db").reset(seed=0)


def test_spider_oracle_answers_on_duckdb_or_says_it_cannot(tmp_path):
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = palaestra.make("sql:Spider-v0", backend="duckdb")
    for row in range(env.unwrapped.problem_count):  # bare columns beside COUNT(*) included
        observation, _ = env.reset(options={"index": row})
        assert env.step(env.oracle()(observation))[1] == 1.0, env.unwrapped.problem.answer
    folder = tmp_path / "db" / "mini"
    folder.mkdir(parents=True)
    connection = sqlite3.connect(folder / "mini.sqlite")
    connection.executescript("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1);")
    connection.commit()
    connection.close()
    questions = tmp_path / "dev.json"
    record = {"db_id": "mini", "question": "Type of a?", "query": "SELECT typeof(a) FROM t"}
    questions.write_text(json.dumps([record]))
    env = SQLDataset(questions, tmp_path / "db", backend="duckdb")
    env.reset(seed=0)
    with pytest.raises(NotImplementedError, match=r"no oracle on duckdb.*another result"):
        env.oracle()


@pytest.mark.parametrize("env_id", ["sql:Mixed-v0", "sql:Mixed-Tools-v0", "sql:Spider-SQLTag-v0"])
def test_garbage_actions_never_raise(env_id):
    env = palaestra.make(env_id)
    rng = np.random.default_rng(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(4):
            garbage = "".join(
                chr(int(c)) for c in rng.integers(1, 0x2FFF, size=int(rng.integers(0, 300)))
            )
            for action in (
                garbage,
                f"<solution>{garbage}</solution>",
                f"<sql>{garbage}</sql>",
                "<tool_call>{]</tool_call>",
            ):
                env.step(action)


def test_schema_lists_create_statements():
    text = SQLiteDatabase(database_path("hospital")).schema()
    assert text.count("CREATE TABLE") == 4 and "REFERENCES patients(id)" in text


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_duckdb_backend_same_env_api(domain):
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = palaestra.make(f"sql:{domain.title()}-v0", backend="duckdb")
    for seed in range(12):
        transcript = play(env, seed)
        assert transcript[-1][5] is True, (domain, seed)
    env.reset(seed=0)
    assert env.step("<solution>SELECT 1 WHERE FALSE</solution>")[1] == 0.0


@pytest.mark.parametrize(
    "attack",
    [
        "COPY (SELECT 1) TO '{out}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '{out}.duckdb' AS evil",
        "INSTALL httpfs",
        "SET threads = 64",
        "CREATE TABLE x AS SELECT 1",
        "DELETE FROM orders",
        "SELECT * FROM orders; DELETE FROM orders",
    ],
)
def test_duckdb_backend_refuses_writes_and_external_access(attack, tmp_path):
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = palaestra.make("sql:Shop-Tools-v0", backend="duckdb")
    env.reset(seed=0)
    out = tmp_path / "leak.csv"
    query = attack.format(out=out)
    call = tool_format("hermes").format(ToolCall("sql", {"query": query}), env.tools)
    observation, _, terminated, *_ = env.step(call)
    assert observation.startswith("error") and not terminated, (attack, observation)
    assert list(tmp_path.iterdir()) == []


def test_duckdb_runaway_query_is_interrupted():
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    env = palaestra.make("sql:Shop-Tools-v0", backend="duckdb", timeout=0.3)
    env.reset(seed=0)
    runaway = (
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT COUNT(*) FROM c"
    )
    observation = env.step(
        tool_format("hermes").format(ToolCall("sql", {"query": runaway}), env.tools)
    )[0]
    assert "time limit" in observation


def test_duckdb_copy_keeps_rows_nulls_and_text():
    pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    path = database_path("shop")
    lite, duck = open_database(path), open_database(path, "duckdb")
    for sql in [
        "SELECT COUNT(*), COUNT(email), SUM(CASE WHEN name LIKE '%''%' THEN 1 ELSE 0 END) FROM customers",
        "SELECT name, city FROM customers ORDER BY id LIMIT 50",
        "SELECT COUNT(*), SUM(quantity) FROM order_items",
    ]:
        assert lite.query(sql).rows == duck.query(sql).rows, sql
    assert (
        execution_match(
            "SELECT COUNT(*) FROM orders", "SELECT COUNT(id) FROM orders", path, backend="duckdb"
        )
        == 1.0
    )
