"""Speed of the SQL family: env steps/s with the oracle, and ``execution_match`` checks/s.

* ``sql:Mixed-v0`` (one-step episodes: reset, then the gold query as the answer) and
  ``sql:Mixed-Tools-v0`` (list tables, run the gold query as exploration, answer): steps/s
  and episodes/s of the env driven by its oracle, in one process;
* ``execution_match(gold, gold, db)`` over questions of every domain and level: checks/s
  (each check parses the predicted query and runs both queries).

    python benchmarks/bench_sql.py --episodes 500
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import sqlglot

import palaestra
from palaestra.envs.sql.databases import DOMAINS, database_path
from palaestra.envs.sql.questions import generate_question
from palaestra.verifiers.sql import connect_readonly, execution_match


def oracle_rate(env_id: str, episodes: int) -> tuple[float, float]:
    """(steps/s, episodes/s) of ``env_id`` played by its oracle over ``episodes`` seeds."""
    env = palaestra.make(env_id)
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


def match_rate(checks: int, backend: str = "sqlite") -> float:
    """``execution_match`` checks/s on gold-vs-gold pairs of every domain, the predicted
    query on ``backend`` (DuckDB gets the gold in its dialect)."""
    pairs = []
    rng = np.random.default_rng(0)
    domains = sorted(DOMAINS)
    connections = {d: connect_readonly(database_path(d)) for d in domains}
    for index in range(checks):
        domain = domains[index % len(domains)]
        question = generate_question(domain, connections[domain], rng)
        pairs.append((question.gold_sql, database_path(domain)))
    answers = [sqlglot.transpile(gold, read="sqlite", write=backend)[0] for gold, _ in pairs]
    execution_match(answers[0], pairs[0][0], pairs[0][1], backend=backend)  # start a worker
    started = time.perf_counter()
    matched = sum(
        execution_match(answer, gold, path, backend=backend)
        for answer, (gold, path) in zip(answers, pairs, strict=True)
    )
    elapsed = time.perf_counter() - started
    assert matched == checks, f"{checks - matched} gold queries did not match themselves"
    return checks / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "duckdb"])
    args = parser.parse_args()
    for domain in DOMAINS:
        database_path(domain)  # built before timing
    print("| measure | rate |\n| --- | ---: |")
    for env_id in ("sql:Mixed-v0", "sql:Mixed-Tools-v0"):
        steps, episodes = oracle_rate(env_id, args.episodes)
        print(f"| {env_id} with its oracle | {steps:,.0f} steps/s ({episodes:,.0f} episodes/s) |")
    for backend in args.backends:
        rate = match_rate(args.checks, backend)
        print(f"| execution_match on {backend} (gold vs gold) | {rate:,.0f} checks/s |")


if __name__ == "__main__":
    main()
