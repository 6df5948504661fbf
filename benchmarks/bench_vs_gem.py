"""Episodes per second: palaestra's runner vs GEM's SyncVectorEnv and AsyncVectorEnv.

Same games (GEM's and palaestra's guess-the-number, 1..50), same binary-search agent, at
1/32/256 envs, first with an instant agent, then with an agent whose per-call latency is
lognormal (median 20 ms, p99 200 ms). A lock-step vector env waits for the slowest call of
each step (a batch finishes when its longest generation does); the runner steps each
episode as soon as its own action arrives. All rows run in one process, one after another,
taking turns over five rounds, and each keeps its best round, so ratios are fair on a shared
machine.

    python benchmarks/bench_vs_gem.py            # full run, prints a markdown table
    python benchmarks/bench_vs_gem.py --quick    # a smoke run
    python benchmarks/bench_vs_gem.py --only "palaestra Runner" --envs 256 --episodes 6000
                                                 # one driver, once, instant agent (for profilers)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from common import BinarySearchAgent, GemGuessTheNumber, SearchState, timed

import palaestra
from palaestra.agents import LatencyAgent
from palaestra.runner import Runner, Task

MEDIAN_S, P99_S = 0.02, 0.2
REPEATS = 5
DRIVERS = ("GEM sync", "GEM async", "palaestra SyncVectorEnv", "palaestra Runner")


def gem_vector(env_factory, n: int, async_mode: bool):
    from gem.vector.async_vector_env import AsyncVectorEnv
    from gem.vector.sync_vector_env import SyncVectorEnv

    cls = AsyncVectorEnv if async_mode else SyncVectorEnv
    return cls(env_ids=["bench"] * n, env_fns=[env_factory] * n)


def run_vector(vec, n: int, episodes: int, latency: LatencyAgent | None, rng) -> int:
    """Drive a lock-step vector env until ``episodes`` episodes ended; returns the count."""
    observations, _ = vec.reset(seed=0)
    states = [SearchState() for _ in range(n)]
    actions = [state.guess(None) for state in states]
    done = 0
    while done < episodes:
        if latency is not None:  # the batch is ready when its slowest call is
            time.sleep(max(latency.sample_delay(rng) for _ in range(n)))
        observations, _, terminated, truncated, _ = vec.step(actions)
        ended = terminated | truncated
        for i in range(n):
            if ended[i]:
                done += 1
                states[i] = SearchState()
                actions[i] = states[i].guess(None)
            else:
                actions[i] = states[i].guess(observations[i])
    return done


def run_runner(env_id: str, n: int, episodes: int, latency: bool) -> int:
    agent = BinarySearchAgent()
    if latency:
        agent = LatencyAgent(agent, MEDIAN_S, P99_S)
    # Unseeded tasks: the vector envs reseed nothing on autoreset either (same work per episode).
    tasks = (Task(env_id) for _ in range(episodes))
    runner = Runner(agent, concurrency=n)

    async def consume() -> int:
        # Episodes are streamed and dropped, as the vector-env loop keeps none either.
        solved = 0
        async for episode in runner.stream(tasks):
            solved += episode.error is None and episode.turns[-1].reward == 1.0
        return solved

    solved = asyncio.run(consume())
    assert solved == episodes, f"{episodes - solved} episodes unsolved or failed"
    return solved


def palaestra_vector(env_id: str, n: int):
    return palaestra.runner.SyncVectorEnv.from_id(env_id, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few episodes, for a smoke test")
    parser.add_argument(
        "--only",
        choices=DRIVERS,
        help="play with this driver alone, once, instant agent, and print nothing",
    )
    parser.add_argument("--game", choices=["gem", "palaestra"], default="palaestra")
    parser.add_argument("--envs", type=int, default=256, help="with --only")
    parser.add_argument("--episodes", type=int, default=20_000, help="with --only")
    args = parser.parse_args()
    palaestra.register("bench:GemGuessTheNumber-v0", GemGuessTheNumber, override=True)
    games = {
        "GEM guess-the-number": ("bench:GemGuessTheNumber-v0", GemGuessTheNumber),
        "palaestra guess-the-number": (
            "game:GuessTheNumber-v0",
            lambda: palaestra.make("game:GuessTheNumber-v0"),
        ),
    }
    rng = np.random.default_rng(0)
    if args.only:
        env_id, factory = games[f"{'GEM' if args.game == 'gem' else 'palaestra'} guess-the-number"]
        drivers(env_id, factory, args.envs, args.episodes, None, rng)[args.only]()
        return
    instant_episodes = 2_000 if args.quick else 20_000
    rows = []

    def record(game, mode, n, calls):
        # Drivers take turns, REPEATS rounds; each keeps its best round (the machine is shared).
        speeds = dict.fromkeys(calls, 0.0)
        for _ in range(REPEATS):
            for name, fn in calls.items():
                count, seconds = timed(fn)
                speeds[name] = max(speeds[name], count / seconds)
        best_gem = max(speeds["GEM sync"], speeds["GEM async"])
        rows.append((game, mode, n, speeds, speeds["palaestra Runner"] / best_gem))
        print(_row(rows[-1]), flush=True)

    print(_header(), flush=True)
    for game, (env_id, factory) in games.items():
        for n in (1, 32, 256):
            episodes = max(instant_episodes, 4 * n)
            record(game, "instant", n, drivers(env_id, factory, n, episodes, None, rng))
    latency = LatencyAgent(BinarySearchAgent(), MEDIAN_S, P99_S)
    env_id, factory = games["GEM guess-the-number"]
    for n in (32, 256):
        episodes = (2 if args.quick else 6) * n
        record(
            "GEM guess-the-number",
            "lognormal latency",
            n,
            drivers(env_id, factory, n, episodes, latency, rng),
        )


def drivers(env_id, factory, n, episodes, latency, rng) -> dict[str, Callable[[], int]]:
    """The four ways to play ``episodes`` episodes at ``n`` envs, as zero-argument calls."""
    return {
        "GEM sync": partial(run_vector, gem_vector(factory, n, False), n, episodes, latency, rng),
        "GEM async": partial(run_vector, gem_vector(factory, n, True), n, episodes, latency, rng),
        "palaestra SyncVectorEnv": partial(
            run_vector, palaestra_vector(env_id, n), n, episodes, latency, rng
        ),
        "palaestra Runner": partial(run_runner, env_id, n, episodes, latency is not None),
    }


def _header() -> str:
    return (
        "| game | agent | envs | GEM sync | GEM async | palaestra SyncVectorEnv | palaestra Runner "
        "| Runner / best GEM |\n|---|---|---:|---:|---:|---:|---:|---:|"
    )


def _row(row) -> str:
    game, mode, n, speeds, ratio = row
    cells = " | ".join(f"{speeds[k]:,.0f}" for k in DRIVERS)
    return f"| {game} | {mode} | {n} | {cells} | **{ratio:.2f}x** |"


if __name__ == "__main__":
    main()
