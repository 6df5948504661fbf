"""Per-episode cost of the adapters' runner: a new palaestra Runner per episode (what
``integrations.trajectory.play`` did before) vs one ``EpisodeRunner`` reused, side by side.

Each episode is played token-level with a tiny tokenizer and a scripted engine that answers
at once (the same answer every turn), so what is measured is the adapter's own overhead:
building the env and the chat-template renderer, recording the token sequence. Rounds
alternate the variants; the median of the rounds is reported. (The Runner-per-episode
variant never closes its envs, as before: its sandboxes outlive the episodes.)

    python benchmarks/bench_adapter_runner.py --episodes 30 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from palaestra.agents.base import Action, Conversation
from palaestra.integrations.trajectory import EpisodeRunner
from palaestra.runner import Runner, Task
from palaestra.trainers import tiny

ANSWERS = {"game:GuessTheNumber-v0": r"\boxed{25}", "math:Arithmetic-Python-v0": r"\boxed{0}"}
"""A game that is cheap to build, and a tool env whose python sandbox takes ~0.5 s to start."""


class ScriptedEngine:
    """A token-level agent that answers ``text`` at once (for the Runner-per-episode variant)."""

    def __init__(self, tokenizer, text: str):
        self.tokenizer = tokenizer
        self.ids = tokenizer.encode(text + "<|im_end|>")
        self.text = text

    async def act(self, conversation: Conversation) -> Action:
        return Action(self.text, self.ids, [-0.5] * len(self.ids), "stop")

    async def generate(self, prompt_ids: list[int], max_tokens: int | None) -> Action:
        return Action(self.text, self.ids, [-0.5] * len(self.ids), "stop")


async def runner_per_episode(engine: ScriptedEngine, env_id: str, episodes: int) -> None:
    for seed in range(episodes):
        await Runner(engine, concurrency=1).run_episode(Task(env_id, seed))


async def reused_runner(engine: ScriptedEngine, env_id: str, episodes: int) -> None:
    runner = EpisodeRunner(engine.tokenizer)
    for seed in range(episodes):
        await runner.play(Task(env_id, seed), engine.generate)
    runner.close()


def episodes_per_second(variant, engine: ScriptedEngine, env_id: str, episodes: int) -> float:
    started = time.perf_counter()
    asyncio.run(variant(engine, env_id, episodes))
    return episodes / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    tokenizer = tiny.train_tokenizer(
        ["I am thinking of an integer. Guess the word."], vocab_size=300
    )
    variants = {"Runner per episode": runner_per_episode, "EpisodeRunner reused": reused_runner}
    for env_id, answer in ANSWERS.items():
        engine = ScriptedEngine(tokenizer, answer)
        rates: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(options.rounds):
            for name, variant in variants.items():
                rates[name].append(episodes_per_second(variant, engine, env_id, options.episodes))
        base = statistics.median(rates["Runner per episode"])
        for name, values in rates.items():
            rate = statistics.median(values)
            print(f"{env_id:24s} {name:22s} {rate:8.1f} episodes/s  {rate / base:5.2f}x")


if __name__ == "__main__":
    main()
