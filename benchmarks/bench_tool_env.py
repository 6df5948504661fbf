"""Speed of the tool-use family, per domain and level: env steps/s, episodes/s and steps per
episode with the oracle and with random play, and the time of a reset.

Each episode: reset (draw the episode's database from the seed, or take it from the cache;
draw a task, replay its reference actions on a fresh copy for the end state to reach), then
the oracle's steps: questions to the user (hard tasks), one action with every reference tool
call, and the report to the user, whose reply ends the conversation. Random play sends the env's
random actions (short random text) until the user runs out of patience. Steps are env steps
(tool steps and user messages alike). Resets are timed on seeds seen by nothing else in the
run: each on a new seed (a database built), and in groups of 8 on one seed (a GRPO group:
the database and the draw come from the caches).

    python benchmarks/bench_tool_env.py --episodes 300
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import palaestra

GROUP = 8


def play_rate(env_id: str, episodes: int, player: str) -> tuple[float, float, float]:
    """(episodes/s, steps per episode, success rate) of ``env_id`` played by its oracle
    (``player`` "oracle") or by random actions ("random")."""
    env, rng = palaestra.make(env_id), np.random.default_rng(0)
    env.reset(seed=0)  # imports and schemas, outside the timing
    steps = wins = 0
    started = time.perf_counter()
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        policy = env.oracle() if player == "oracle" else lambda _: env.random_action(rng)
        while True:
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            steps += 1
            if terminated or truncated:
                wins += reward == 1.0
                break
    elapsed = time.perf_counter() - started
    env.close()
    return episodes / elapsed, steps / episodes, wins / episodes


def reset_ms(env_id: str, resets: int, group: int, first_seed: int) -> float:
    """Milliseconds per reset, ``group`` resets per seed, on seeds from ``first_seed``."""
    env = palaestra.make(env_id)
    env.reset(seed=first_seed - 1)
    seeds = max(1, resets // group)
    started = time.perf_counter()
    for seed in range(first_seed, first_seed + seeds):
        for _ in range(group):
            env.reset(seed=seed)
    return (time.perf_counter() - started) / (seeds * group) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--pattern", default="tools:*")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()}")
    print(
        f"{'env id':<24} {'steps/s':>9} {'episodes/s':>11} {'steps/ep':>9} {'success':>8} "
        f"{'reset ms':>9} {f'group of {GROUP}':>12} {'random ep/s':>12} {'steps/ep':>9} "
        f"{'success':>8}"
    )
    for env_id in palaestra.list_envs(args.pattern):
        episodes, per_episode, success = play_rate(env_id, args.episodes, "oracle")
        fresh = reset_ms(env_id, args.episodes // 4, 1, 10_000)
        grouped = reset_ms(env_id, args.episodes // 4, GROUP, 20_000)
        random_episodes, random_steps, random_success = play_rate(env_id, args.episodes, "random")
        print(
            f"{env_id:<24} {episodes * per_episode:>9.0f} {episodes:>11.1f} {per_episode:>9.2f} "
            f"{success:>8.2f} {fresh:>9.1f} {grouped:>12.1f} {random_episodes:>12.1f} "
            f"{random_steps:>9.2f} {random_success:>8.2f}"
        )
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
