"""Seconds per weight push into an in-process vLLM engine, and where they go.

Builds a random-init Qwen2 (head_dim 64, tied embeddings, float32) with a locally trained
tokenizer, starts ``VLLMEngine`` on it (eager mode), then pushes fresh weights ``--pushes``
times after one warm-up push. Reports the median of each part of ``VLLMAgent.update_weights``
(see ``PushTiming``) and of the whole ``VLLMEngine.push_weights``.

    python benchmarks/bench_vllm_push.py                       # the tests' tiny model
    python benchmarks/bench_vllm_push.py --hidden 1024 --layers 8 --vocab 32000 --memory-share 0.3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile

import torch

from palaestra.agents.base import Sampling
from palaestra.trainers import tiny
from palaestra.trainers.engines import VLLMEngine

TEXTS = ["Write a few lowercase letters.", "Again."]


def _perturb(model: torch.nn.Module, seed: int) -> None:
    """New weights in place, as an optimizer step would leave them."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 1e-3)


async def _measure(engine: VLLMEngine, model: torch.nn.Module, pushes: int) -> dict[str, float]:
    await engine.push_weights(model)  # warm-up
    parts: dict[str, list[float]] = {}
    for seed in range(pushes):
        _perturb(model, seed)
        weights = [(name, p.detach()) for name, p in model.named_parameters()]
        timing = await engine.agent.update_weights(weights)
        for part in ("write_s", "transfer_s", "load_s", "cache_reset_s", "total_s"):
            parts.setdefault(part, []).append(getattr(timing, part))
        parts.setdefault("push_weights_s", []).append(await engine.push_weights(model))
    await engine.agent.aclose()
    return {part: statistics.median(values) for part, values in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushes", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=0, help="model vocabulary (0: tokenizer's)")
    parser.add_argument(
        "--memory-share",
        type=float,
        default=0.1,
        help="vLLM's gpu_memory_utilization (on CPU: RAM)",
    )
    args = parser.parse_args()

    tokenizer = tiny.train_tokenizer(TEXTS, vocab_size=280)
    vocab = args.vocab or len(tokenizer)
    model = tiny.tiny_qwen2(vocab, hidden_size=args.hidden, num_layers=args.layers)
    mbytes = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    with tempfile.TemporaryDirectory() as path:
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        engine = VLLMEngine(
            path, Sampling(max_tokens=4), enforce_eager=True, dtype="float32",
            gpu_memory_utilization=args.memory_share,
        )  # fmt: skip
        medians = asyncio.run(_measure(engine, model, args.pushes))
    print(
        f"model: hidden {args.hidden}, {args.layers} layers, vocab {vocab}, "
        f"{mbytes:.1f} MiB float32; median of {args.pushes} pushes"
    )
    print("| part | ms |\n| --- | ---: |")
    for part, seconds in medians.items():
        print(f"| {part} | {seconds * 1e3:.1f} |")


if __name__ == "__main__":
    main()
