"""Runner overhead per turn with an instant agent.

Plays guess-the-number (1..50) with a binary-search agent that answers at once: a bare
``reset``/``step`` loop (no runner), ``Runner.run_episode`` awaited one after another, and
``Runner.stream`` with the agent's ``act`` plain (the reader plays each episode itself) or
async (32 workers hand episodes to the reader). Overhead per turn = (time per episode - bare
time per episode) / turns per episode. Best of three rounds, rounds interleaved.

    python benchmarks/bench_runner_overhead.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import BinarySearchAgent, SearchState

import palaestra
from palaestra.runner import Runner, Task

ENV_ID = "game:GuessTheNumber-v0"
EPISODES = 20_000
ROUNDS = 3


def bare() -> tuple[float, float]:
    """Seconds and turns per episode of a plain loop."""
    env = palaestra.make(ENV_ID)
    turns = 0
    start = time.perf_counter()
    for _ in range(EPISODES):
        observation, _ = env.reset()
        state = SearchState()
        action = state.guess(None)
        while True:
            observation, _, terminated, truncated, _ = env.step(action)
            turns += 1
            if terminated or truncated:
                break
            action = state.guess(observation)
    return (time.perf_counter() - start) / EPISODES, turns / EPISODES


def sequential() -> float:
    runner = Runner(BinarySearchAgent(), concurrency=1)

    async def go() -> float:
        start = time.perf_counter()
        for _ in range(EPISODES):
            await runner.run_episode(Task(ENV_ID))
        return (time.perf_counter() - start) / EPISODES

    return asyncio.run(go())


class AsyncBinarySearchAgent(BinarySearchAgent):
    """The same agent behind an async ``act``."""

    async def act(self, conversation):
        return super().act(conversation)


def streamed(agent, concurrency: int) -> float:
    runner = Runner(agent, concurrency=concurrency)

    async def go() -> float:
        start = time.perf_counter()
        async for _ in runner.stream(Task(ENV_ID) for _ in range(EPISODES)):
            pass
        return (time.perf_counter() - start) / EPISODES

    return asyncio.run(go())


def main() -> None:
    best: dict[str, float] = {}
    turns = 0.0
    for _ in range(ROUNDS):
        seconds, turns = bare()
        results = {
            "bare loop": seconds,
            "run_episode, one at a time": sequential(),
            "stream, plain act": streamed(BinarySearchAgent(), 32),
            "stream, async act, concurrency 32": streamed(AsyncBinarySearchAgent(), 32),
        }
        for name, value in results.items():
            best[name] = min(best.get(name, float("inf")), value)
    print(f"{EPISODES} episodes of {ENV_ID}, {turns:.2f} turns per episode, best of {ROUNDS}\n")
    print("| path | µs per episode | episodes/s | overhead µs per turn |\n|---|---:|---:|---:|")
    for name, seconds in best.items():
        overhead = (seconds - best["bare loop"]) / turns * 1e6
        print(f"| {name} | {seconds * 1e6:.1f} | {1 / seconds:,.0f} | {overhead:.1f} |")


if __name__ == "__main__":
    main()
