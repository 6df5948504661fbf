"""Speed of the tool-use family: env steps/s and episodes/s with the oracle, per domain and level.

Each episode: reset (copy the domain's database, draw a task, replay its reference actions on
a fresh copy to get the end state to reach), then the oracle's steps: a question to the user
(hard tasks), one action with every reference tool call, and the report to the user, whose
reply ends the conversation. Steps are env steps (tool steps and user messages alike).

    python benchmarks/bench_tool_env.py --episodes 300
"""

from __future__ import annotations

import argparse
import os
import time

import palaestra


def oracle_rate(env_id: str, episodes: int) -> tuple[float, float, float]:
    """(steps/s, episodes/s, success rate) of ``env_id`` played by its oracle."""
    env = palaestra.make(env_id)
    env.reset(seed=0)  # builds the domain's database once, outside the timing
    steps = wins = 0
    started = time.perf_counter()
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        policy = env.oracle()
        while True:
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            steps += 1
            if terminated or truncated:
                wins += reward == 1.0
                break
    elapsed = time.perf_counter() - started
    env.close()
    return steps / elapsed, episodes / elapsed, wins / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--pattern", default="tools:*")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()}")
    print(f"{'env id':<24} {'steps/s':>9} {'episodes/s':>11} {'success':>8}")
    for env_id in palaestra.list_envs(args.pattern):
        steps, episodes, success = oracle_rate(env_id, args.episodes)
        print(f"{env_id:<24} {steps:>9.0f} {episodes:>11.0f} {success:>8.2f}")


if __name__ == "__main__":
    main()
