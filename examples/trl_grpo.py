"""Multi-turn GRPO with TRL's ``GRPOTrainer`` on a palaestra env, on CPU, with a tiny local model.

``palaestra.integrations.trl.EnvRollout`` is TRL's ``rollout_func``: it plays whole episodes
of guess-the-number (several turns each: guess, feedback, guess...) with the model being
trained and hands TRL the token-exact sequences, with an ``env_mask`` that keeps the env's
feedback tokens out of the loss. The episode's return is the reward.

A random-init model never guesses right, so every episode would score 0 and GRPO would have
nothing to learn from: the script first warms the model up with a little SFT on the oracle's
binary searches (palaestra's ``collect_demonstrations``/``train_sft``), stopping early so the
model is right only part of the time, then trains it with TRL.

    python examples/trl_grpo.py --steps 4 --output-dir runs/trl_grpo
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from palaestra.agents import OracleAgent
from palaestra.integrations.trl import EnvRollout, episode_return, task_dataset
from palaestra.runner import Runner, make_tasks
from palaestra.trainers import tiny
from palaestra.trainers.sft import collect_demonstrations, train_sft

ENV_ID = "game:GuessTheNumber-Easy-v0"


def build_trainer(
    output_dir: Path,
    *,
    steps: int,
    sft_steps: int = 300,
    stop_loss: float = 0.6,
    max_turns: int = 4,
    seed: int = 0,
) -> Any:
    """A ``GRPOTrainer`` over a tiny Qwen2 (warmed up by SFT on oracle episodes) and
    :class:`EnvRollout`; ``sft_steps=0`` keeps the random init."""
    from trl import GRPOConfig, GRPOTrainer

    demos = Runner(OracleAgent()).run(make_tasks([ENV_ID], range(1000, 1064)))
    texts = [demos[0].system_prompt or ""]
    texts += [message["content"] for e in demos for message in e.messages[1:]]
    tokenizer = tiny.train_tokenizer(texts, vocab_size=400)
    tokenizer.padding_side = "left"  # TRL pads prompts on the left
    model = tiny.tiny_qwen2(len(tokenizer), seed=seed, init_std=0.1)
    if sft_steps:
        episodes = collect_demonstrations(ENV_ID, range(1000, 1256), tokenizer)
        losses = train_sft(
            model,
            episodes,
            steps=sft_steps,
            lr=3e-3,
            pad_token_id=tokenizer.pad_token_id,
            stop_loss=stop_loss,
            seed=seed,
        )
        print(f"SFT on {len(episodes)} oracle episodes: loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=12,
        learning_rate=1e-3,
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
        train_dataset=task_dataset(ENV_ID, range(256)),
        processing_class=tokenizer,
        rollout_func=EnvRollout(max_turns=max_turns),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output-dir", type=Path, default=Path("runs/trl_grpo"))
    options = parser.parse_args()
    trainer = build_trainer(options.output_dir, steps=options.steps)
    trainer.train()
    for record in trainer.state.log_history:
        if "loss" in record:
            print({key: round(value, 4) for key, value in record.items() if key in _SHOWN})


_SHOWN = ("step", "loss", "reward", "grad_norm", "completions/mean_length")

if __name__ == "__main__":
    main()
