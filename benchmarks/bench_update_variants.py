"""The price of the update's extra forward passes, side by side on one batch.

Decoupled PPO adds one forward pass without gradient per step (the proximal policy's
logprobs); Clip-Cov and KL-Cov add one per optimizer step (their token selection over the
whole mini-batch). This times ``PolicyUpdater.step`` for plain PPO-clip, decoupled PPO-clip,
Clip-Cov and KL-Cov on the same batch and model (a random-init 2-layer Qwen2, head_dim 64,
vocabulary 1024; 64 sequences of 96 tokens, half of them policy tokens; micro-batches of 16)
and reports the median step time of each and its ratio to plain PPO-clip. The variants take
turns, so a change in the machine's load touches all of them alike.

    python benchmarks/bench_update_variants.py --steps 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from palaestra.trainers import tiny
from palaestra.trainers.batch import TrainBatch
from palaestra.trainers.config import TrainerConfig
from palaestra.trainers.update import PolicyUpdater

VOCAB, ROWS, LENGTH, MICRO = 1024, 64, 96, 16
VARIANTS = {
    "ppo_clip": {},
    "ppo_clip, decoupled": {"decoupled": True},
    "clip_cov": {"policy_loss": "clip_cov"},
    "kl_cov": {"policy_loss": "kl_cov"},
}


def fixed_batch(seed: int = 0) -> TrainBatch:
    """Random tokens; the second half of each row is the policy's, with advantages +-1."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, VOCAB, (ROWS, LENGTH), generator=generator)
    loss_mask = torch.zeros(ROWS, LENGTH)
    loss_mask[:, LENGTH // 2 :] = 1.0
    advantages = torch.where(torch.arange(ROWS)[:, None] % 2 == 0, 1.0, -1.0).expand(ROWS, LENGTH)
    old_logprobs = torch.full((ROWS, LENGTH), -7.0)
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=advantages.contiguous(),
        has_old_logprobs=loss_mask > 0,
        prox_logprobs=old_logprobs,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant")
    args = parser.parse_args()
    batch = fixed_batch()
    updaters = {
        name: PolicyUpdater(
            tiny.tiny_qwen2(VOCAB, seed=0),
            TrainerConfig(loss=loss, optim={"lr": 1e-5}, update={"micro_batch_size": MICRO}),
        )
        for name, loss in VARIANTS.items()
    }
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for step in range(args.steps + 1):  # the first round warms up
        for name, updater in updaters.items():
            started = time.perf_counter()
            updater.step(batch)
            if step:
                times[name].append(time.perf_counter() - started)
    base = statistics.median(times["ppo_clip"])
    print("| update | step s (median) | vs ppo_clip |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
