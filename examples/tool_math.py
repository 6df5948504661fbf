"""Tool-integrated reasoning: arithmetic with a sandboxed python REPL, evaluated, then trained.

Its default run does not learn, and says so at the end (held-out reward before and after RL):
the tiny model built here from scratch calls the tool but rarely copies its result right
after the warm start (held-out reward 0.05-0.08), and GRPO then rewards the lucky guesses
that skip the tool over the failed tool calls beside them in their group, so tool use dies
out and the reward falls to about 0 (0.047 -> 0.000 in 20 steps; with a longer warm start and
all-zero groups dropped, 0.078 -> 0.016). The script shows the tool env's whole path through
the trainer (tool turns, masking, the python sandbox); for a CPU run that learns, see
``palaestra train --preset cpu-demo`` or ``examples/grpo_minimal.py``, and on a GPU train a
model that already writes tool calls (``palaestra train`` with ``rollout.env_id`` this env).

``math:Arithmetic-Python-v0`` is the arithmetic env wrapped in ``ToolEnv`` with the python
tool (registered as a wrapper stack, so the runner, ``palaestra eval`` and the trainer take it
like any id). The script

1. evaluates the env's oracle, which computes with the tool and then answers
   (the same as ``palaestra eval math:Arithmetic-Python-v0 --agent oracle -n 16``);
2. builds a tiny local model, warms it up on oracle demonstrations (tool call, tool result,
   answer) and trains it with GRPO for a few steps; tool results are masked from the loss
   (``update.train_on_env_tokens: true`` would train on them too).

    python examples/tool_math.py --steps 3 --output-dir runs/tool_math
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from palaestra.agents import OracleAgent
from palaestra.evaluation import EvalConfig, evaluate
from palaestra.evaluation.cli import results_table
from palaestra.runner import Runner, make_tasks
from palaestra.trainers import tiny
from palaestra.trainers.config import TrainerConfig
from palaestra.trainers.metrics_log import read_metrics
from palaestra.trainers.sft import collect_demonstrations, train_sft
from palaestra.trainers.trainer import Trainer

ENV_ID = "math:Arithmetic-Python-v0"
ENV_KWARGS = {"difficulty": "easy", "num_terms": 2, "max_value": 9, "operators": "+-"}
"""Sums and differences of two numbers up to 9: a model built from scratch learns to write
the call in a few CPU minutes of warm start (copying the tool's answer it mostly does not)."""
CORPUS_SEEDS, DEMO_SEEDS = range(2_000_000, 2_000_064), range(3_000_000, 3_000_128)
"""Seeds of the tokenizer corpus and of the warm-start demonstrations, apart from train and
the held-out eval seeds (1,000,000 on)."""


def evaluate_oracle(episodes: int) -> float:
    """Success rate of the oracle (tool call, then the tool's output as the answer)."""
    result = evaluate(OracleAgent(), EvalConfig([ENV_ID], episodes=episodes))
    from rich.console import Console

    Console().print(results_table(result.summaries, title=f"oracle on {ENV_ID}"))
    return result.summaries[0].success_rate


def warm_started_policy(sft_steps: int, seed: int) -> tuple[Any, Any]:
    """A tokenizer trained on the env's texts and a tiny Qwen2, warmed up on oracle
    demonstrations (tool call, tool result, answer)."""
    corpus = Runner(OracleAgent()).run(make_tasks([ENV_ID], CORPUS_SEEDS, env_kwargs=ENV_KWARGS))
    texts = [corpus[0].system_prompt or ""]
    texts += [m["content"] for e in corpus for m in e.messages[1:]]
    tokenizer = tiny.train_tokenizer(texts, vocab_size=400)
    model = tiny.tiny_qwen2(len(tokenizer), seed=seed)
    demos = collect_demonstrations(ENV_ID, DEMO_SEEDS, tokenizer, env_kwargs=ENV_KWARGS)
    losses = train_sft(
        model, demos, steps=sft_steps, lr=3e-3, pad_token_id=tokenizer.pad_token_id, stop_loss=0.3
    )
    print(f"warm start on {len(demos)} demonstrations: loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    return model, tokenizer


def train(
    output_dir: Path, steps: int, sft_steps: int = 150, seed: int = 0
) -> list[dict[str, float]]:
    """Warm start, then ``steps`` GRPO steps on the tool env, with a held-out eval (64 seeds)
    before the first step and after the last; returns each step's metrics."""
    model, tokenizer = warm_started_policy(sft_steps, seed)
    config = TrainerConfig.model_validate(
        {
            "seed": seed,
            "steps": steps,
            "output_dir": str(output_dir),
            "eval_every": steps,
            "eval_episodes": 64,
            "rollout": {
                "env_id": ENV_ID,
                "env_kwargs": ENV_KWARGS,
                "group_size": 4,
                "groups_per_step": 8,
                "max_new_tokens": 48,
            },
            "advantage": {"estimator": "grpo"},
            "optim": {"lr": 5e-4, "warmup_steps": 3, "adam_eps": 1e-5},
            "log": {"console": False},
        }
    )
    with Trainer(config, model, tokenizer) as trainer:
        history = trainer.train()
    for record in history:
        print(
            f"step {int(record['step'])}: reward {record['reward']:.3f}, "
            f"tool turns per episode {record['tool_turns']:.2f}"
        )
    evals = [
        r["eval/reward"] for r in read_metrics(output_dir / "metrics.jsonl") if "eval/reward" in r
    ]
    print(f"held-out reward (64 tasks): {evals[0]:.3f} before RL -> {evals[-1]:.3f} after")
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16, help="oracle eval episodes")
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps")
    parser.add_argument("--sft-steps", type=int, default=150, help="warm-start steps (at most)")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/tool_math"))
    args = parser.parse_args()
    success = evaluate_oracle(args.episodes)
    print(f"oracle success rate: {success:.0%}")
    train(args.output_dir, args.steps, args.sft_steps)


if __name__ == "__main__":
    main()
