"""Tokens per second of the transformers agent: requests one at a time vs decoded together.

A random-init tiny Qwen2 (2 layers, head_dim 64, the tokenizer trained on the games' texts)
answers N concurrent requests; ``max_batch=1`` generates them one after another,
``max_batch=256`` decodes them together. Both sample the same tokens (per-request seeds), so
the token counts match and the ratio is the batching alone. One small warm-up generation
runs first (the first forward pass of a process is slow).

    python benchmarks/bench_hf_agent.py
"""

from __future__ import annotations

import argparse
import asyncio
import time

from palaestra.agents.base import Conversation, Sampling
from palaestra.agents.hf import HFAgent
from palaestra.trainers import tiny
from palaestra.trainers.demo import env_texts

CASES = [  # (concurrent requests, words in the prompt, max new tokens)
    (1, 5, 256),
    (8, 5, 128),
    (8, 100, 128),
    (16, 5, 512),
    (64, 5, 64),
]


def conversations(tokenizer, count: int, words: int) -> list[Conversation]:
    messages = [{"role": "user", "content": "Guess the number between 1 and 50. " * words}]
    prompt_ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return [Conversation(messages, prompt_ids=prompt_ids, seed=(i,)) for i in range(count)]


def tokens_per_second(agent: HFAgent, batch: list[Conversation]) -> tuple[int, float]:
    async def answer_all():
        return await asyncio.gather(*(agent.act(c) for c in batch))

    start = time.perf_counter()
    actions = asyncio.run(answer_all())
    return sum(len(a.token_ids) for a in actions), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases", type=int, nargs="+", help=f"rows of the table to run (0..{len(CASES) - 1})"
    )
    cases = [CASES[i] for i in parser.parse_args().cases or range(len(CASES))]
    tokenizer = tiny.train_tokenizer(env_texts(), vocab_size=512)
    model = tiny.tiny_qwen2(len(tokenizer), max_positions=4096).eval()
    warm_up = HFAgent(model, tokenizer=tokenizer, sampling=Sampling(max_tokens=4))
    tokens_per_second(warm_up, conversations(tokenizer, 2, 5))
    print(
        "| requests | prompt tokens | max new tokens | one at a time tok/s | together tok/s | speed-up |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for count, words, max_tokens in cases:
        batch = conversations(tokenizer, count, words)
        sampling = Sampling(max_tokens=max_tokens)
        speeds = {}
        for max_batch in (1, 256):
            agent = HFAgent(model, tokenizer=tokenizer, sampling=sampling, max_batch=max_batch)
            tokens, seconds = tokens_per_second(agent, batch)
            speeds[max_batch] = tokens / seconds
        print(
            f"| {count} | {len(batch[0].prompt_ids)} | {max_tokens} | {speeds[1]:,.0f} | "
            f"{speeds[256]:,.0f} | {speeds[256] / speeds[1]:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
