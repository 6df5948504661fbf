"""The CPU demo (``palaestra train --preset cpu-demo``): a tiny model learns small sums.

The env is ``math:Arithmetic-v0`` cut down to the 16 sums ``a + b`` with ``a, b`` in 1..4 and
two attempts (a wrong first answer gets "not correct, try again" and a second turn), scored by
the env's own verifier: reward 1 when the last answer is the sum inside ``\\boxed{}``.

1. Build a tiny policy locally: a byte-level BPE tokenizer trained on the env's own texts
   (Qwen2's pre-tokenizer, so every digit is a token) and a random-init 2-layer Qwen2.
   Its initial weights are wider than Qwen2's default (std 0.1, not 0.02): a model this small
   then learns to attend to the question's digits within a few dozen SFT steps instead of
   sitting on the plateau where it ignores the question for a hundred or more.
2. Warm it up with SFT on oracle demonstrations, stopped once the loss falls to
   ``SFT_STOP_LOSS``: it then writes the answer format perfectly and gets about a third of
   the sums right, but has never seen a second attempt (the oracle is never wrong). A step
   budget would not do: how long the plateau lasts varies by seed.
3. RL it with GRPO through the runner: 16 problems a step with 4 episodes each, so every
   step sees nearly every sum; two optimizer steps per batch at a small learning rate. RL
   sharpens the first answers and may learn to use the second attempt: the warm-started
   model answers some sums alike (it does not yet tell them apart), and a different second
   answer is the way to get those right. Held-out seeds are evaluated every 10 steps (256
   episodes); the reward curve is printed and saved as ``reward_curve.png`` (with
   matplotlib) next to ``metrics.jsonl``.

The warm-started model is saved under ``DIR/init`` and the run's config under
``DIR/config.yaml``, so ``palaestra train DIR/config.yaml`` repeats the RL part.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from palaestra.agents import OracleAgent
from palaestra.runner import Runner, make_tasks
from palaestra.trainers import tiny
from palaestra.trainers.config import TrainerConfig
from palaestra.trainers.sft import collect_demonstrations, train_sft
from palaestra.trainers.trainer import Trainer

ENV_ID = "math:Arithmetic-v0"
ENV_KWARGS = {
    "difficulty": "easy",
    "num_terms": 2,
    "max_value": 4,
    "operators": "+",
    "max_attempts": 2,
}

CORPUS_SEEDS = range(2_000_000, 2_000_200)
DEMO_SEEDS = range(3_000_000, 3_000_256)
"""Seeds of the tokenizer corpus and of the SFT demonstrations, apart from train and eval."""

VOCAB_SIZE = 1024
INIT_STD = 0.1
SFT_MAX_STEPS = 100
SFT_STOP_LOSS = 0.3
"""Mean token loss of the last 5 SFT steps at which the warm start stops (by then the answer
format costs almost nothing; what is left is the digit of the sum)."""
SFT_BATCH_SIZE = 64
SFT_LR = 3e-3
RL_STEPS = 40
INIT_DIR = "init"
PLOT_FILE = "reward_curve.png"


def cpu_demo_config(
    output_dir: str | Path, *, seed: int = 0, steps: int = RL_STEPS
) -> TrainerConfig:
    """The RL part of the demo: GRPO, 16 groups of 4 episodes per step, two optimizer steps
    per batch, up to 8 tokens per answer."""
    return TrainerConfig(
        seed=seed,
        steps=steps,
        output_dir=str(output_dir),
        eval_every=10,
        eval_episodes=256,
        model={"path": str(Path(output_dir) / INIT_DIR)},
        rollout={
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "group_size": 4,
            "groups_per_step": 16,
            "max_new_tokens": 8,
            "concurrency": 64,
        },
        advantage={"estimator": "grpo"},
        loss={"policy_loss": "ppo_clip"},
        # a short warmup and an epsilon above the noise level of the gradients: fresh AdamW
        # steps every near-zero-gradient weight (e.g. unused embedding rows) by a full lr
        optim={"lr": 5e-4, "warmup_steps": 3, "adam_eps": 1e-5},
        update={"micro_batch_size": 32, "mini_batches": 2},
    )


@dataclass(slots=True)
class DemoResult:
    """What the demo measured: eval reward before and after RL, the curve, wall time."""

    history: list[dict[str, float]]
    eval_start: float
    eval_end: float
    seconds: float
    plot: Path | None


def run_cpu_demo(
    output_dir: str | Path,
    *,
    seed: int = 0,
    steps: int = RL_STEPS,
    console: Console | None = None,
) -> DemoResult:
    """Build, warm up and RL a tiny policy on small sums (see the module docstring)."""
    import torch

    console = console or Console()
    started = time.perf_counter()
    torch.manual_seed(seed)
    config = cpu_demo_config(output_dir, seed=seed, steps=steps)
    console.print(f"[bold]1/3[/bold] tiny policy: tokenizer and 2-layer Qwen2 (seed {seed})")
    tokenizer = tiny.train_tokenizer(env_texts(), vocab_size=VOCAB_SIZE)
    model = tiny.tiny_qwen2(len(tokenizer), seed=seed, init_std=INIT_STD)
    demos = collect_demonstrations(ENV_ID, DEMO_SEEDS, tokenizer, env_kwargs=ENV_KWARGS)
    losses = train_sft(
        model,
        demos,
        steps=SFT_MAX_STEPS,
        lr=SFT_LR,
        batch_size=SFT_BATCH_SIZE,
        pad_token_id=tokenizer.pad_token_id,
        seed=seed,
        stop_loss=SFT_STOP_LOSS,
    )
    console.print(
        f"[bold]2/3[/bold] SFT warm start on {len(demos)} oracle demonstrations: "
        f"{len(losses)} steps, loss {losses[0]:.2f} -> {losses[-1]:.2f}"
    )
    model.save_pretrained(config.model.path)
    tokenizer.save_pretrained(config.model.path)
    console.print(f"[bold]3/3[/bold] RL: GRPO for {steps} steps on {ENV_ID} {ENV_KWARGS}")
    with Trainer(config, model, tokenizer, console=console) as trainer:
        history = trainer.train()
    evals = [record for record in history if "eval/reward" in record]
    baseline = _first_eval(config.output_dir)
    result = DemoResult(
        history=history,
        eval_start=baseline,
        eval_end=evals[-1]["eval/reward"] if evals else float("nan"),
        seconds=time.perf_counter() - started,
        plot=plot_reward_curve(Path(config.output_dir) / "metrics.jsonl"),
    )
    console.print(reward_curve_text(Path(config.output_dir) / "metrics.jsonl"))
    console.print(
        f"eval reward (held-out seeds) {result.eval_start:.3f} -> {result.eval_end:.3f} "
        f"in {result.seconds:.0f} s" + (f"; plot: {result.plot}" if result.plot else "")
    )
    return result


def reward_curve_text(metrics_path: str | Path, *, window: int = 10, width: int = 40) -> str:
    """Eval reward and the train reward averaged over the last ``window`` steps, at every eval
    step, as a text bar chart (the bar is the eval reward)."""
    from palaestra.trainers.metrics_log import read_metrics

    records = read_metrics(metrics_path)
    train = [(r["step"], r["reward"]) for r in records if "reward" in r]
    lines = [f"step  train (mean of {window})  eval"]
    for record in records:
        if "eval/reward" not in record:
            continue
        recent = [
            value for step, value in train if record["step"] - window < step <= record["step"]
        ]
        mean = sum(recent) / len(recent) if recent else None
        bar = "#" * round(record["eval/reward"] * width)
        lines.append(
            f"{int(record['step']):>4}  {_fmt(mean):>17}  {_fmt(record['eval/reward'])}  {bar}"
        )
    return "\n".join(lines)


def plot_reward_curve(metrics_path: str | Path) -> Path | None:
    """Save the train and eval reward curves as ``reward_curve.png`` beside ``metrics_path``;
    None when matplotlib is not installed (``pip install palaestra[train]`` has it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from palaestra.trainers.metrics_log import read_metrics

    records = read_metrics(metrics_path)
    train = [(r["step"], r["reward"]) for r in records if "reward" in r]
    evaluation = [(r["step"], r["eval/reward"]) for r in records if "eval/reward" in r]
    figure, axes = plt.subplots(figsize=(6, 3.5))
    if train:
        steps, rewards = zip(*train, strict=True)
        axes.plot(steps, rewards, label="train (batch mean)", alpha=0.3)
        smooth = [
            sum(rewards[max(0, i - 9) : i + 1]) / len(rewards[max(0, i - 9) : i + 1])
            for i in range(len(rewards))
        ]
        axes.plot(steps, smooth, label="train (mean of 10 steps)")
    if evaluation:
        axes.plot(*zip(*evaluation, strict=True), "o-", label="eval (held-out seeds)")
    axes.set_xlabel("step")
    axes.set_ylabel("mean reward")
    axes.set_ylim(0, 1)
    axes.legend()
    figure.tight_layout()
    path = Path(metrics_path).with_name(PLOT_FILE)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def env_texts(
    env_id: str = ENV_ID,
    env_kwargs: dict[str, Any] | None = None,
    seeds: Iterable[int] = CORPUS_SEEDS,
) -> list[str]:
    """System prompt, tasks, oracle moves and feedback of a few episodes of ``env_id`` (by
    default the demo's env): the tokenizer corpus."""
    kwargs = ENV_KWARGS if env_kwargs is None and env_id == ENV_ID else env_kwargs
    episodes = Runner(OracleAgent()).run(make_tasks([env_id], seeds, env_kwargs=kwargs))
    texts: list[str] = []
    for episode in episodes:
        texts += [episode.system_prompt or "", episode.task]
        texts += [text for turn in episode.turns for text in (turn.action, turn.observation)]
    return texts


def _first_eval(output_dir: str) -> float:
    from palaestra.trainers.metrics_log import read_metrics

    for record in read_metrics(Path(output_dir) / "metrics.jsonl"):
        if "eval/reward" in record:
            return float(record["eval/reward"])
    return float("nan")


def _fmt(value: Any) -> str:
    return f"{value:5.3f}" if value is not None else "  -  "
