"""The SQL family's file caches under load: a file in use is never deleted, a file that
went is built again, and the folders stay bounded."""

from __future__ import annotations

import collections
import fcntl
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.envs.sql import databases, suite
from palaestra.envs.sql.databases import database_path
from palaestra.envs.sql.env import SyntheticSQL
from palaestra.envs.sql.suite import fuzzed_path
from palaestra.verifiers.sql import (
    FileHold,
    SharedDatabases,
    SQLiteDatabase,
    delete_unless_held,
    execution_match,
    hold_file,
)

GOLD = "SELECT name FROM customers WHERE city = 'Lisbon' ORDER BY name"


@pytest.fixture
def tiny_cache(tmp_path, monkeypatch):
    """A private cache folder that keeps 2 generated and 1 fuzzed file besides those held."""
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(databases, "MAX_CACHED_DATABASES", 2)
    monkeypatch.setattr(suite, "MAX_FUZZED_DATABASES", 1)
    monkeypatch.setattr(SharedDatabases, "capacity", 0)  # no file open once no env uses it
    return tmp_path / "sql"


def test_many_envs_drawing_and_grading_at_once_never_lose_a_file(tiny_cache):
    """Envs on threads draw new questions (new databases, new fuzzed copies) and grade the
    oracle's answer at once, far past the caches' capacity: every episode scores 1 and no
    error escapes (before holds were taken before eviction, files in use and files being
    written were deleted: FileNotFoundError, or a right answer scored 0)."""
    errors: collections.Counter[str] = collections.Counter()
    rewards: list[float] = []
    envs = [SyntheticSQL("mixed", "easy") for _ in range(8)]

    def play(index: int) -> None:
        env = envs[index]
        for episode in range(5):
            try:
                env.reset(seed=index * 100 + episode)
                rewards.append(env.step(env.oracle()(None))[1])
            except Exception as error:
                errors[f"{type(error).__name__}: {error}"] += 1

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(envs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors.most_common(3)
    assert rewards == [1.0] * 40
    held = {path for env in envs for path in env._sqlite}
    files = set(tiny_cache.glob("*.sqlite")) | set((tiny_cache / "fuzzed").glob("*.sqlite"))
    assert held <= files  # every file an env holds is there
    assert not list(tiny_cache.glob("fuzzed/.*"))  # no temporary file left behind
    for env in envs:
        env.close()
    database_path("shop", 7)  # the next build evicts what no env holds any more
    fuzzed_path(database_path("shop", 7), GOLD)
    assert len(list(tiny_cache.glob("*.sqlite"))) <= 2
    assert len(list((tiny_cache / "fuzzed").glob("*.sqlite"))) <= 1


def test_a_file_deleted_while_an_env_holds_it_is_built_again(tiny_cache):
    """A user clearing the cache (or another machine's process) mid-episode: the episode's
    database and its fuzzed copy are built again, the same bytes, and the oracle scores 1."""
    env = SyntheticSQL("shop", "easy")
    for backend_query in (False, True):
        env.reset(seed=3)
        paths = [env.unwrapped.db_path, *env.unwrapped.suite_paths()]
        before = {path: path.read_bytes() for path in paths}
        for path in paths:
            path.unlink()
        if backend_query:  # the agent's query runs in a worker, which opens the file by path
            assert env.unwrapped.query("SELECT COUNT(*) FROM customers").rows[0][0] > 0
        assert env.step(env.oracle()(None))[1] == 1.0
        assert {path: path.read_bytes() for path in paths} == before
    env.close()


def test_execution_match_builds_a_missing_file_again(tiny_cache):
    episode = database_path("shop", 5)
    copy = fuzzed_path(episode, GOLD)
    other = database_path("shop", 6)
    for path in (copy, other, episode):
        path.unlink()
    assert execution_match(GOLD, GOLD, episode, suite=[other, copy]) == 1.0
    assert all(path.is_file() for path in (copy, other, episode))


def test_a_hold_taken_while_the_file_is_deleted_says_so(tmp_path):
    """The eviction race: the evictor locks the file, a holder opens it and waits for the
    lock, the evictor deletes it; the holder must not think it holds the file at the path."""
    path = database_path("school", 0, tmp_path)
    evictor = os.open(path, os.O_RDONLY)
    fcntl.flock(evictor, fcntl.LOCK_EX)
    outcome: list[object] = []

    def hold() -> None:
        try:
            outcome.append(hold_file(object(), path))
        except FileNotFoundError as error:
            outcome.append(error)

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.2)  # the holder is waiting for the lock
    path.unlink()
    os.close(evictor)
    holder.join()
    assert isinstance(outcome[0], FileNotFoundError)
    held = FileHold(path)  # a hold that may build: built again from its name, and held
    assert path.is_file() and not delete_unless_held(path)
    held.close()
    assert delete_unless_held(path)


def test_the_caches_never_delete_a_file_being_written(tiny_cache):
    """A fuzzed copy is written under a temporary name in the folder it is renamed into;
    eviction leaves such a file alone unless a dead writer left it long ago."""
    episode = database_path("shop", 0)
    folder = tiny_cache / "fuzzed"
    folder.mkdir(parents=True, exist_ok=True)
    writing, left = folder / ".fuzzed-writing.sqlite", folder / ".fuzzed-dead.sqlite"
    writing.write_bytes(b"")
    left.write_bytes(b"")
    hour_ago = time.time() - databases.STALE_TEMPORARY_S - 60
    os.utime(left, (hour_ago, hour_ago))
    for index in range(3):
        fuzzed_path(episode, GOLD, index)
    assert writing.exists() and not left.exists()
    assert len(list(folder.glob("[!.]*.sqlite"))) == 1


def test_a_database_opened_after_its_path_was_handed_out_is_there(tiny_cache):
    """A path handed out without a hold and evicted before it is opened: opening it builds
    it again (SQLiteDatabase holds it from then on)."""
    path = database_path("library", 1)
    for seed in range(2, 6):
        database_path("library", seed)
    assert not path.exists()  # evicted: nothing held it
    database = SQLiteDatabase(path)
    assert database.query("SELECT COUNT(*) FROM members").rows[0][0] > 0
    for seed in range(6, 9):
        database_path("library", seed)
    assert path.is_file()  # held while open
    database.close()


def test_envs_share_one_sqlite_database_per_file_and_keep_it_while_in_use(tiny_cache):
    first, second = SyntheticSQL("shop", "easy", db_seed=0), SyntheticSQL("shop", "easy", db_seed=0)
    first.reset(seed=1)
    second.reset(seed=2)
    shared = first.sqlite()
    assert second.sqlite() is shared
    first.close()
    assert second.step(second.oracle()(None))[1] == 1.0  # still open: second uses it
    second.close()
    with pytest.raises(Exception, match="closed"):  # no env uses it: closed (capacity 0)
        shared.tables()


def test_threads_on_one_shared_connection_each_get_their_own_deadline(tiny_cache):
    database = SQLiteDatabase(database_path("shop", 0))
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
    outcome: dict[str, object] = {}

    def run(name: str, sql: str, timeout: float) -> None:
        started = time.perf_counter()
        try:
            outcome[name] = database.query_trusted(sql, timeout=timeout).rows
        except Exception as error:
            outcome[name] = error
        outcome[name + "_s"] = time.perf_counter() - started

    threads = [threading.Thread(target=run, args=("slow", slow, 0.5))]
    threads += [
        threading.Thread(target=run, args=(f"quick{i}", "SELECT COUNT(*) FROM customers", 5.0))
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "time limit" in str(outcome["slow"]) and outcome["slow_s"] < 2.0
    for i in range(4):  # waited at most for the slow one, then ran under its own limit
        assert outcome[f"quick{i}"][0][0] > 0, outcome
    database.close()


def test_threads_wanting_one_missing_file_build_it_once(tiny_cache, monkeypatch):
    builds = []
    build = databases._build

    def counted(domain, seed, path):
        builds.append(path)
        time.sleep(0.05)  # long enough for every thread to find the file missing
        build(domain, seed, path)

    monkeypatch.setattr(databases, "_build", counted)
    barrier = threading.Barrier(6)

    def draw(_: int) -> Path:
        barrier.wait()
        return database_path("shop", 4242)

    with ThreadPoolExecutor(6) as threads:
        paths = set(threads.map(draw, range(6)))
    assert len(paths) == 1 and len(builds) == 1
