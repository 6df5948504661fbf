"""One GRPO training step, palaestra's Trainer vs TRL's GRPOTrainer, side by side.

Same tiny model (a local byte-level tokenizer and a random-init 2-layer Qwen2, identical
initial weights), same batch (8 prompts x 8 generations, at most 8 new tokens, temperature 1),
same reward (one guess at guess-the-number 1..8: the env's reward for the completion), same
optimizer (AdamW, lr 1e-3, no KL term), CPU, transformers for both (TRL: one padded
``generate`` per batch; palaestra: the HF engine, which decodes concurrent requests together). Reports the median
step time over the timed steps, split into rollout (generation + reward), update and weight
sync.

    python benchmarks/bench_train_step_vs_trl.py --steps 6

Needs ``pip install -e '.[train,bench]'`` (TRL).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import palaestra
from palaestra.trainers import tiny
from palaestra.trainers.config import TrainerConfig
from palaestra.trainers.demo import env_texts
from palaestra.trainers.trainer import Trainer

ENV_ID = "game:GuessTheNumber-v0"
ENV_KWARGS = {"min_number": 1, "max_number": 8, "max_turns": 1}
PROMPTS, GENERATIONS, MAX_NEW_TOKENS, LR = 8, 8, 8, 1e-3


def env_reward(seed: int, completion: str) -> float:
    """The env's reward for ``completion`` as the single move of the task of ``seed``."""
    env = palaestra.make(ENV_ID, **ENV_KWARGS)
    env.reset(seed=seed)
    return float(env.step(completion)[1])


def palaestra_step_times(model_dir: Path, out: Path, steps: int) -> dict[str, float]:
    config = TrainerConfig(
        steps=steps + 1,
        output_dir=str(out),
        model={"path": str(model_dir)},
        rollout={
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "group_size": GENERATIONS,
            "groups_per_step": PROMPTS,
            "max_new_tokens": MAX_NEW_TOKENS,
            "concurrency": PROMPTS * GENERATIONS,
        },
        advantage={"estimator": "grpo"},
        optim={"lr": LR, "max_grad_norm": 1.0},
        update={"micro_batch_size": PROMPTS * GENERATIONS},
        log={"console": False},
    )
    trainer = Trainer.from_config(config)
    started = time.perf_counter()
    history = trainer.train()[1:]  # the first step warms up
    wall = (time.perf_counter() - started) / (steps + 1)
    return {
        "rollout": statistics.median(r["rollout_time"] for r in history),
        "update": statistics.median(r["update_time"] for r in history),
        "sync": statistics.median(r["sync_time"] for r in history),
        "step (wall, incl. warm-up)": wall,
    }


class TRLRun:
    """TRL's GRPOTrainer on guess-the-number with the env's reward, timed per step and per
    rollout (generation + reward: seconds and completion tokens)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        out: Path,
        *,
        prompts: int,
        steps: int,
        max_new_tokens: int,
        lr: float,
        bf16: bool = False,
    ) -> None:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        env = palaestra.make(ENV_ID, **ENV_KWARGS)
        rows = []
        for seed in range(prompts * steps):
            task, _ = env.reset(seed=seed)
            prompt = [
                {"role": "system", "content": env.system_prompt},
                {"role": "user", "content": task},
            ]
            rows.append({"prompt": prompt, "seed": seed})

        def reward(completions, seed, **_) -> list[float]:
            return [env_reward(s, c[0]["content"]) for s, c in zip(seed, completions, strict=True)]

        config = GRPOConfig(
            output_dir=str(out),
            per_device_train_batch_size=prompts * GENERATIONS,
            num_generations=GENERATIONS,
            max_completion_length=max_new_tokens,
            max_steps=steps,
            learning_rate=lr,
            lr_scheduler_type="constant",
            max_grad_norm=1.0,
            beta=0.0,
            temperature=1.0,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=not torch.cuda.is_available(),
            bf16=bf16,
            shuffle_dataset=False,
        )
        self.step_times: list[float] = []
        self.rollouts: list[tuple[float, int]] = []
        step_times = self.step_times

        class StepTimer(TrainerCallback):
            def on_step_begin(self, *args, **kwargs):
                self.started = time.perf_counter()

            def on_step_end(self, *args, **kwargs):
                step_times.append(time.perf_counter() - self.started)

        self.trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=reward,
            args=config,
            train_dataset=Dataset.from_list(rows),
            callbacks=[StepTimer()],
        )
        generate = self.trainer._generate_and_score_completions

        def timed_generate(*args, **kwargs):
            started = time.perf_counter()
            result = generate(*args, **kwargs)
            tokens = int(result["completion_mask"].sum())
            self.rollouts.append((time.perf_counter() - started, tokens))
            return result

        self.trainer._generate_and_score_completions = timed_generate

    def train(self) -> None:
        self.trainer.train()

    def median_step(self) -> float:
        """Median seconds per step, the first (warm-up) left out."""
        return statistics.median(self.step_times[1:])

    def median_rollout(self) -> float:
        return statistics.median(seconds for seconds, _ in self.rollouts[1:])


def trl_step_times(model_dir: Path, out: Path, steps: int) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = TRLRun(
        AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        AutoTokenizer.from_pretrained(model_dir),
        out,
        prompts=PROMPTS,
        steps=steps + 1,
        max_new_tokens=MAX_NEW_TOKENS,
        lr=LR,
    )
    started = time.perf_counter()
    run.train()
    wall = (time.perf_counter() - started) / (steps + 1)
    rollout = run.median_rollout()
    return {
        "rollout": rollout,
        "update": run.median_step() - rollout,
        "sync": 0.0,
        "step (wall, incl. warm-up)": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps (after one warm-up)")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tokenizer = tiny.train_tokenizer(env_texts(), vocab_size=1024)
        model = tiny.tiny_qwen2(len(tokenizer), seed=0)
        model.save_pretrained(root / "model")
        tokenizer.save_pretrained(root / "model")
        results = {
            "palaestra Trainer (HF engine)": palaestra_step_times(
                root / "model", root / "palaestra", args.steps
            ),
            "TRL GRPOTrainer": trl_step_times(root / "model", root / "trl", args.steps),
        }
    print(f"{PROMPTS} prompts x {GENERATIONS} generations, <= {MAX_NEW_TOKENS} new tokens")
    print("| trainer | rollout s | update s | sync s | step s (median) | wall s/step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, times in results.items():
        step = times["rollout"] + times["update"] + times["sync"]
        print(
            f"| {name} | {times['rollout']:.3f} | {times['update']:.3f} | {times['sync']:.4f} "
            f"| {step:.3f} | {times['step (wall, incl. warm-up)']:.3f} |"
        )


if __name__ == "__main__":
    main()
