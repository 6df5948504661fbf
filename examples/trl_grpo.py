"""Multi-turn GRPO with TRL's ``GRPOTrainer`` on a palaestra env, on CPU, with a tiny local model.

``palaestra.integrations.trl.EnvRollout`` is TRL's ``rollout_func``: it plays whole episodes
of the CPU demo's env (a small sum with two attempts: a wrong first answer gets "not
correct, try again" and a second turn) with the model being trained, generating each round
of turns with TRL's own generation, and hands TRL the token-exact sequences with an
``env_mask`` that keeps the env's feedback out of the loss. The episode's return is the
reward. Each step rolls out 16 groups (tasks) of 4 episodes and takes two optimizer steps on
them, 8 groups each, so some group has rewards that differ and no gradient is zero (the
recipe of ``palaestra train --preset cpu-demo``); the script prints the reward of every step,
the gradient norm of every optimizer step and the mean reward of the first and last quarter
of the run.

A random-init model never answers right, so every episode would score 0 and GRPO would have
nothing to learn from: the script first warms the model up with a little SFT on the oracle's
answers (palaestra's ``collect_demonstrations``/``train_sft``, as ``palaestra train --preset
cpu-demo`` does), stopping early so the model is right only part of the time, then trains it
with TRL. AdamW's epsilon at 1e-5 keeps the policy from collapsing to one answer per sum
within a few steps (with the default 1e-8 it did, at this learning rate).

    python examples/trl_grpo.py --steps 30 --output-dir runs/trl_grpo
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from palaestra.integrations.trl import EnvRollout, episode_return, task_dataset
from palaestra.trainers import demo, tiny
from palaestra.trainers.sft import collect_demonstrations, train_sft

ENV_ID, ENV_KWARGS = demo.ENV_ID, demo.ENV_KWARGS


def build_trainer(
    output_dir: Path,
    *,
    steps: int,
    groups: int = 16,
    group_size: int = 4,
    sft_steps: int = demo.SFT_MAX_STEPS,
    learning_rate: float = 5e-4,
    seed: int = 0,
) -> Any:
    """A ``GRPOTrainer`` over a tiny Qwen2 (warmed up by SFT on oracle episodes, as in
    ``palaestra.trainers.demo``) and :class:`EnvRollout`: ``steps`` rollouts of ``groups``
    tasks of ``group_size`` episodes, two optimizer steps each; ``sft_steps=0`` keeps the
    random init."""
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = tiny.train_tokenizer(demo.env_texts(), vocab_size=demo.VOCAB_SIZE)
    tokenizer.padding_side = "left"  # TRL pads prompts on the left
    model = tiny.tiny_qwen2(len(tokenizer), seed=seed, init_std=demo.INIT_STD)
    if sft_steps:
        episodes = collect_demonstrations(ENV_ID, demo.DEMO_SEEDS, tokenizer, env_kwargs=ENV_KWARGS)
        losses = train_sft(
            model,
            episodes,
            steps=sft_steps,
            lr=demo.SFT_LR,
            batch_size=demo.SFT_BATCH_SIZE,
            pad_token_id=tokenizer.pad_token_id,
            stop_loss=demo.SFT_STOP_LOSS,
            seed=seed,
        )
        print(f"SFT on {len(episodes)} oracle episodes: loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=2 * steps,
        # each step's rollouts (groups x group_size episodes) feed two optimizer steps
        per_device_train_batch_size=groups * group_size // 2,
        steps_per_generation=2,
        num_generations=group_size,
        max_completion_length=112,  # the whole episode: both answers and the feedback (88)
        generation_kwargs={"max_new_tokens": 8},  # one answer
        learning_rate=learning_rate,
        # as in palaestra's CPU demo: a short warmup and an epsilon above the gradients' noise
        # (AdamW's default 1e-8 steps every near-zero-gradient weight by a full lr)
        warmup_steps=3,
        adam_epsilon=1e-5,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=seed,
        save_strategy="no",
        disable_tqdm=True,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=episode_return,
        args=args,
        train_dataset=task_dataset(ENV_ID, range(1024), env_kwargs=ENV_KWARGS),
        processing_class=tokenizer,
        rollout_func=EnvRollout(),
    )


def step_records(trainer: Any) -> list[dict[str, float]]:
    """TRL's log record of each optimizer step (the first of each pair has the rollouts'
    ``reward``)."""
    return [record for record in trainer.state.log_history if "grad_norm" in record]


def rewards(trainer: Any) -> list[float]:
    """The mean reward of each step's rollouts."""
    return [record["reward"] for record in step_records(trainer) if "reward" in record]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--output-dir", type=Path, default=Path("runs/trl_grpo"))
    options = parser.parse_args()
    trainer = build_trainer(options.output_dir, steps=options.steps)
    trainer.train()
    for record in step_records(trainer):
        print({key: round(record[key], 4) for key in _SHOWN if key in record})
    curve = rewards(trainer)
    window = max(1, len(curve) // 4)
    first, last = sum(curve[:window]) / window, sum(curve[-window:]) / window
    print(f"mean reward, first {window} steps: {first:.3f}; last {window} steps: {last:.3f}")


_SHOWN = ("step", "reward", "reward_std", "grad_norm", "loss", "completions/mean_length")

if __name__ == "__main__":
    main()
