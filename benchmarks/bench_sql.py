"""Speed of the SQL family: resets, oracle episodes, and ``execution_match`` checks.

* reset: ms per ``reset`` of ``sql:Mixed-v0`` on seeds never seen (each builds its
  database) and on the same seeds again (cached, as when a GRPO group replays a seed);
* ``sql:Mixed-v0`` (reset, the gold query as the answer) and ``sql:Mixed-Tools-v0`` (list
  tables, run the gold query, answer) driven by their oracle, on a pinned database
  (``db_seed=0``) and with a database per seed;
* ``execution_match(gold, gold, db)`` over questions of every domain and level on SQLite and
  on DuckDB (the answer in DuckDB's dialect), each check after ``database_path()`` as the
  env issues it: checks/s of wall time, and checks per CPU second of this process and the
  query workers together (steadier on a loaded machine).

    python benchmarks/bench_sql.py --episodes 300 --checks 300

``--save-pairs FILE`` writes the question pairs; ``--pairs FILE`` checks those instead, so
two versions of palaestra can be timed on the same queries.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import sqlglot

import palaestra
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.questions import generate_question
from palaestra.verifiers.sql import connect_readonly, execution_match


def worker_cpu() -> float:
    """CPU seconds used so far by the SQLite and DuckDB worker processes (0 where none)."""
    pids = []
    for module in ("palaestra.verifiers.sql", "palaestra.verifiers.sql_duckdb"):
        try:
            pids += importlib.import_module(module).default_pool().pids
        except (ImportError, AttributeError):  # a version that ran queries in this process
            continue
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def reset_ms(seeds: range) -> tuple[float, float]:
    """ms per reset of sql:Mixed-v0 on new ``seeds`` (an empty database cache), then on the
    same seeds again."""
    env = palaestra.make("sql:Mixed-v0")
    saved = os.environ.get("PALAESTRA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PALAESTRA_CACHE_DIR"] = cache
        env.reset(seed=seeds[0])
        times = []
        for _ in range(2):
            started = time.perf_counter()
            for seed in seeds[1:]:
                env.reset(seed=seed)
            times.append((time.perf_counter() - started) / (len(seeds) - 1) * 1000)
        env.close()
    if saved is None:
        del os.environ["PALAESTRA_CACHE_DIR"]
    else:
        os.environ["PALAESTRA_CACHE_DIR"] = saved
    return times[0], times[1]


def oracle_rate(env_id: str, episodes: int, **kwargs: object) -> tuple[float, float]:
    """(steps/s, episodes/s) of ``env_id`` played by its oracle over ``episodes`` seeds
    (their databases built before timing)."""
    env = palaestra.make(env_id, **kwargs)
    for seed in range(episodes):
        env.reset(seed=seed)
    steps = 0
    started = time.perf_counter()
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        policy = env.oracle()
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(policy(observation))
            steps += 1
            done = terminated or truncated
    elapsed = time.perf_counter() - started
    env.close()
    return steps / elapsed, episodes / elapsed


def question_pairs(checks: int, levels: tuple[int, ...]) -> list[tuple[str, str]]:
    """(gold SQL, SQLite path) of ``checks`` questions at ``levels`` over every domain."""
    pairs = []
    rng = np.random.default_rng(0)
    domains = sorted(DOMAINS)
    connections = {d: connect_readonly(database_path(d)) for d in domains}
    for index in range(checks):
        domain = domains[index % len(domains)]
        question = generate_question(domain, connections[domain], rng, levels=levels)
        pairs.append((question.gold_sql, str(database_path(domain))))
    return pairs


def env_path(path: str) -> Path:
    """The database at ``path`` asked for as the env asks for it on each reset
    (:func:`database_path`, which marks the file used)."""
    domain, seed = re.fullmatch(r"(\w+)-seed(\d+)-v\d+\.sqlite", Path(path).name).groups()
    return database_path(domain, int(seed), Path(path).parent)


def match_rate(pairs: list[tuple[str, str]], backend: str = "sqlite") -> tuple[float, float]:
    """(checks/s, checks per CPU second) of ``execution_match(gold, gold)`` over ``pairs``,
    the predicted query on ``backend`` (DuckDB gets it in its dialect)."""
    answers = [sqlglot.transpile(gold, read="sqlite", write=backend)[0] for gold, _ in pairs]
    for answer, (gold, path) in zip(answers[:10], pairs[:10], strict=True):
        execution_match(answer, gold, path, backend=backend)  # start workers, load databases
    cpu, worker, started = time.process_time(), worker_cpu(), time.perf_counter()
    matched = sum(
        execution_match(answer, gold, env_path(path), backend=backend)
        for answer, (gold, path) in zip(answers, pairs, strict=True)
    )
    elapsed = time.perf_counter() - started
    used = time.process_time() - cpu + worker_cpu() - worker
    assert matched == len(pairs), f"{len(pairs) - matched} gold queries did not match themselves"
    return len(pairs) / elapsed, len(pairs) / used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "duckdb"])
    parser.add_argument("--pairs", help="JSON file of [gold, path] pairs to check instead")
    parser.add_argument("--save-pairs", help="write this version's question pairs here")
    parser.add_argument("--checks-only", action="store_true")
    args = parser.parse_args()
    for domain in DOMAINS:
        database_path(domain)  # built before timing
    print(f"load: {os.getloadavg()[0]:.2f}\n\n| measure | rate |\n| --- | ---: |")
    if not args.checks_only:
        fresh, again = reset_ms(range(500_000, 500_000 + args.episodes // 3))
        print(f"| sql:Mixed-v0 reset, new seed / same seed again | {fresh:.1f} / {again:.1f} ms |")
        for env_id in ("sql:Mixed-v0", "sql:Mixed-Tools-v0"):
            for label, kwargs in [("db_seed=0", {"db_seed": 0}), ("default", {})]:
                steps, episodes = oracle_rate(env_id, args.episodes, **kwargs)
                rate = f"{steps:,.0f} steps/s ({episodes:,.0f} ep/s)"
                print(f"| {env_id} ({label}) oracle | {rate} |")
    suites = {"all levels": question_pairs(args.checks, (1, 2, 3, 4, 5))}
    suites["levels 1-2"] = question_pairs(args.checks, (1, 2))
    if args.save_pairs:
        Path(args.save_pairs).write_text(json.dumps(suites))
    if args.pairs:
        suites = {
            f"{name} (given)": pairs
            for name, pairs in json.loads(Path(args.pairs).read_text()).items()
        }
    for name, pairs in suites.items():
        for backend in args.backends:
            wall, cpu = match_rate(pairs, backend)
            print(
                f"| execution_match on {backend}, {name} | {wall:,.0f} checks/s, {cpu:,.0f} per CPU s |"
            )


if __name__ == "__main__":
    main()
