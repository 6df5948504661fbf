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


def match_rate(checks: int) -> float:
    """``execution_match`` checks/s on gold-vs-gold pairs of every domain."""
    pairs = []
    rng = np.random.default_rng(0)
    domains = sorted(DOMAINS)
    connections = {d: connect_readonly(database_path(d)) for d in domains}
    for index in range(checks):
        domain = domains[index % len(domains)]
        question = generate_question(domain, connections[domain], rng)
        pairs.append((question.gold_sql, database_path(domain)))
    started = time.perf_counter()
    matched = sum(execution_match(gold, gold, path) for gold, path in pairs)
    elapsed = time.perf_counter() - started
    assert matched == checks, "a gold query did not match itself"
    return checks / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--checks", type=int, default=500)
    args = parser.parse_args()
    for domain in DOMAINS:
        database_path(domain)  # built before timing
    print("| measure | rate |\n| --- | ---: |")
    for env_id in ("sql:Mixed-v0", "sql:Mixed-Tools-v0"):
        steps, episodes = oracle_rate(env_id, args.episodes)
        print(f"| {env_id} with its oracle | {steps:,.0f} steps/s ({episodes:,.0f} episodes/s) |")
    print(f"| execution_match (gold vs gold) | {match_rate(args.checks):,.0f} checks/s |")


if __name__ == "__main__":
    main()
