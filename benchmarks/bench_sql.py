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
two versions of palaestra can be timed on the same queries. ``--suite-sizes 0 1 2 4 8``
also times checks with test-suite grading (``suite=K``) and measures what it catches:
near misses made from generated golds (DISTINCT added or dropped, a bound made strict or
loose) that score 1 on the episode's database, how many some database of 16 other seeds
tells apart, and how many ``suite=K`` scores 0 (and how many of those that no database
tells apart it wrongly fails).
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
from palaestra.envs.sql.databases import DOMAINS, database_path, suite_paths
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


def match_rate(
    pairs: list[tuple[str, str]], backend: str = "sqlite", suite: int = 0
) -> tuple[float, float]:
    """(checks/s, checks per CPU second) of ``execution_match(gold, gold)`` over ``pairs``,
    the predicted query on ``backend`` (DuckDB gets it in its dialect), graded on ``suite``
    more databases of the pair's domain."""
    answers = [sqlglot.transpile(gold, read="sqlite", write=backend)[0] for gold, _ in pairs]
    suites = {d: suite_paths(d, suite) for d in DOMAINS}
    domain_of = lambda path: Path(path).name.split("-seed")[0]  # noqa: E731
    for answer, (gold, path) in zip(answers[:10], pairs[:10], strict=True):
        execution_match(answer, gold, path, backend=backend)  # start workers, load databases
    cpu, worker, started = time.process_time(), worker_cpu(), time.perf_counter()
    matched = sum(
        execution_match(
            answer, gold, env_path(path), backend=backend, suite=suites[domain_of(path)]
        )
        for answer, (gold, path) in zip(answers, pairs, strict=True)
    )
    elapsed = time.perf_counter() - started
    used = time.process_time() - cpu + worker_cpu() - worker
    assert matched == len(pairs), f"{len(pairs) - matched} gold queries did not match themselves"
    return len(pairs) / elapsed, len(pairs) / used


MUTATIONS = [
    ("SELECT DISTINCT ", "SELECT "),
    ("SELECT ", "SELECT DISTINCT "),
    (" >= ", " > "),
    (" <= ", " < "),
    (" > ", " >= "),
    (" < ", " <= "),
]
POOL_SEEDS = range(100, 116)
"""Seeds of the databases that decide whether a near miss can be told apart at all."""


def near_misses(questions: int, episode_seeds: range) -> list[tuple[str, str, str, Path]]:
    """(domain, gold, mutated gold, episode database) where the mutation (one edit of
    :data:`MUTATIONS`, first occurrence) scores 1 on the episode's own database."""
    found = []
    rng = np.random.default_rng(1)
    domains = sorted(DOMAINS)
    for index in range(questions):
        domain = domains[index % len(domains)]
        path = database_path(domain, episode_seeds[index % len(episode_seeds)])
        question = generate_question(domain, connect_readonly(path), rng)
        for old, new in MUTATIONS:
            if old not in question.gold_sql:
                continue
            mutated = question.gold_sql.replace(old, new, 1)
            if execution_match(mutated, question.gold_sql, path) == 1.0:
                found.append((domain, question.gold_sql, mutated, path))
    return found


def suite_catch(questions: int, sizes: list[int]) -> None:
    """Print, per suite size, the near misses it scores 0. Any database where a miss and the
    gold differ proves them different, so every 0 here is a true catch."""
    misses = near_misses(questions, range(0, 40))
    pools = {d: [database_path(d, s) for s in POOL_SEEDS] for d in DOMAINS}
    told = [any(execution_match(m, g, p) == 0.0 for p in pools[d]) for d, g, m, _ in misses]
    print(
        f"\n{len(misses)} near misses right on their episode's database; "
        f"{sum(told)} told apart by some database of {len(POOL_SEEDS)} other seeds\n"
    )
    print(
        "| suite | misses the 16 seeds tell apart, scored 0 | other misses scored 0 (the "
        "suite's data tells them apart) |\n| ---: | ---: | ---: |"
    )
    for size in sizes:
        caught = [
            execution_match(m, g, path, suite=suite_paths(d, size)) == 0.0
            for d, g, m, path in misses
        ]
        hit = sum(c for c, t in zip(caught, told, strict=True) if t)
        other = sum(c for c, t in zip(caught, told, strict=True) if not t)
        print(f"| {size} | {hit}/{sum(told)} | {other} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "duckdb"])
    parser.add_argument("--pairs", help="JSON file of [gold, path] pairs to check instead")
    parser.add_argument("--save-pairs", help="write this version's question pairs here")
    parser.add_argument("--checks-only", action="store_true")
    parser.add_argument("--suite-sizes", nargs="*", type=int, default=[])
    parser.add_argument("--near-miss-questions", type=int, default=300)
    parser.add_argument("--group", type=int, default=1, help="check each pair this many times")
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
    if args.group > 1:  # each question answered G times in a row, as a GRPO group is
        suites = {
            f"{name}, groups of {args.group}": [pair for pair in pairs for _ in range(args.group)]
            for name, pairs in suites.items()
        }
    if args.save_pairs:
        Path(args.save_pairs).write_text(json.dumps(suites))
    if args.pairs:
        suites = {
            f"{name} (given)": pairs
            for name, pairs in json.loads(Path(args.pairs).read_text()).items()
        }
    for name, pairs in suites.items():
        for backend in args.backends:
            for size in args.suite_sizes or [0]:
                wall, cpu = match_rate(pairs, backend, size)
                print(
                    f"| execution_match on {backend}, {name}, suite={size} | "
                    f"{wall:,.0f} checks/s, {cpu:,.0f} per CPU s |"
                )
    if args.suite_sizes:
        suite_catch(args.near_miss_questions, args.suite_sizes)


if __name__ == "__main__":
    main()
