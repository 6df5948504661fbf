"""Search-R1 / R1-Code-Interpreter in miniature: masking env (tool) tokens out of the loss.

Two envs (``--env``):

* ``python`` (default): ``math:Arithmetic-Python-v0`` cut to sums ``a + b`` with a, b in
  1..9. The oracle calls the python tool
  (``<tool_call>{"name": "python", "arguments": {"code": "print(8 + 6)"}}</tool_call>``),
  reads the printed result and answers ``\\boxed{14}``; reward 1 for the right sum. The tool
  result and the env's messages are about a third of the tokens after the prompt.
* ``search``: ``search:Synthetic-SearchR1-v0`` with single-hop questions over the synthetic
  knowledge base ("Which organisation organised the X?") in the Search-R1 protocol:
  ``<search>query</search>``, the top documents come back inside ``<information>``, then
  ``<answer>``; the retrieved documents are about 80% of the tokens after the prompt.

Both conditions train with GRPO (8 tasks x 4 episodes per step) from the same warm start
(a tiny policy after a short SFT on the oracle): "masked" trains on the policy's own tokens
only (palaestra's default, as Search-R1 and R1-Code-Interpreter do), "unmasked" also on
every observation token (``update.train_on_env_tokens``). Recorded per step: reward of the
training batch and the update's gradient norm; every ``PROBE_EVERY`` steps, on one fixed
batch of held-out tasks: its reward, the share of the loss tokens that are env tokens and
the share of the (token-mean, policy-gradient) loss gradient that comes from them if they
are trained on, ``|g_env| / (|g_env| + |g_policy|)``.

    python examples/science/loss_masking.py --seeds 0 1 2 --steps 40 --jobs 2
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    WarmStart,
    config_from_args,
    parse_args,
    plot_curves,
    run_experiment,
    stack,
    summarize_conditions,
    trim,
    warm_start_from_args,
    write_results,
)

MASKING = {"masked": False, "unmasked": True}
PROBE_EVERY = 10
DEFAULT_OUTPUT = Path("runs/science/loss_masking")
PROBE_KEYS = [
    "probe/env_token_share",
    "probe/env_grad_share",
    "probe/grad_norm_policy",
    "probe/grad_norm_env",
    "probe/reward",
]


@dataclass(frozen=True, slots=True)
class Setup:
    """An env of the experiment: its warm start, where training and held-out seeds start,
    and the tokens allowed per action."""

    warm: WarmStart
    held_out_from: int
    max_new_tokens: int
    title: str


ARITHMETIC = {"difficulty": "easy", "num_terms": 2, "max_value": 9, "operators": "+"}
SETUPS = {
    "python": Setup(
        WarmStart("math:Arithmetic-Python-v0", ARITHMETIC, sft_steps=80),
        held_out_from=1_000_000,
        max_new_tokens=48,
        title="python tool, sums of two digits",
    ),
    "search": Setup(
        WarmStart(
            "search:Synthetic-SearchR1-v0",
            {"kinds": ("single-hop",)},
            sft_steps=150,
            demo_seeds=(5_000, 6_024),
            corpus_seeds=(8_000, 8_100),
        ),
        held_out_from=9_000,
        max_new_tokens=48,
        title="Search-R1 single-hop",
    ),
}
"""A search seed picks the question ``seed % 10_000``: demonstrations (rows 5000-6023),
training (rows from 0) and the held-out probe (rows from 9000) never share a question.
(With the demonstrations on the training rows, the tiny policy memorises their answers and
its reward drops to 0 on the first unseen question.) The 81 sums repeat whatever the seed."""


def base_config(steps: int, setup: Setup) -> dict:
    """GRPO, 8 tasks x 4 episodes per step, lr 1e-4."""
    return {
        "steps": steps,
        "eval_first_seed": setup.held_out_from,
        "rollout": {
            "env_id": setup.warm.env_id,
            "env_kwargs": setup.warm.env_kwargs,
            "group_size": 4,
            "groups_per_step": 8,
            "max_new_tokens": setup.max_new_tokens,
            "concurrency": 64,
        },
        "advantage": {"estimator": "grpo"},
        "optim": {"lr": 1e-4, "warmup_steps": 3, "adam_eps": 1e-5},
        "update": {"micro_batch_size": 32},
    }


def env_option(parser: argparse.ArgumentParser) -> None:
    """This script's own option: which env."""
    parser.add_argument("--env", choices=sorted(SETUPS), default="python")


def env_gradient_share(trainer: Any) -> dict[str, float]:
    """A probe: on one batch of held-out questions (the training batch's shape), the env
    tokens' share of the loss tokens and of the gradient of the token-mean policy-gradient
    loss ``-sum(A * logp) / N`` over policy and env tokens (its gradient at the rollout
    policy, where PPO-clip's equals it), split as ``g = g_policy + g_env``."""
    import torch

    from palaestra.trainers.advantages import compute_advantages
    from palaestra.trainers.batch import build_batch
    from palaestra.trainers.update import sequence_logprobs

    config = trainer.config
    episodes = trainer.runner.run(trainer.tasks(config.eval_first_seed))
    episodes = [e for e in episodes if e.error is None]
    advantages = compute_advantages(
        config.advantage.estimator,
        [e.rewards for e in episodes],
        [e.group_id for e in episodes],
        gamma=config.advantage.gamma,
    )
    batch = build_batch(
        episodes,
        advantages,
        pad_token_id=trainer.tokenizer.pad_token_id or 0,
        train_on_env_tokens=True,
    )
    policy = batch.has_old_logprobs.float() * batch.loss_mask
    env = batch.loss_mask - policy
    logp, _ = sequence_logprobs(trainer.model, batch.input_ids, batch.attention_mask)
    weighted = -(batch.advantages * logp) / batch.loss_mask.sum()
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    norms = {}
    for name, mask in (("policy", policy), ("env", env)):
        grads = torch.autograd.grad((weighted * mask).sum(), params, retain_graph=True)
        norms[name] = float(torch.sqrt(sum((g.float() ** 2).sum() for g in grads)))
    total = norms["env"] + norms["policy"]
    return {
        "probe/env_token_share": float(env.sum() / batch.loss_mask.sum()),
        "probe/env_grad_share": norms["env"] / total if total > 0 else float("nan"),
        "probe/grad_norm_policy": norms["policy"],
        "probe/grad_norm_env": norms["env"],
        "probe/reward": sum(e.total_reward for e in episodes) / len(episodes),
    }


def main(argv: list[str] | None = None) -> dict:
    """Run the experiment; returns the summary written to the results JSON."""
    args = parse_args(__doc__.splitlines()[0], steps=40, argv=argv, extra=env_option)
    setup = SETUPS[args.env]
    config = config_from_args(base_config(args.steps, setup), args)
    output = Path(args.output_dir or DEFAULT_OUTPUT)
    conditions = {name: {"update": {"train_on_env_tokens": on}} for name, on in MASKING.items()}
    results = run_experiment(
        warm_start_from_args(setup.warm, args),
        config,
        conditions,
        args.seeds,
        output,
        jobs=args.jobs,
        probe=env_gradient_share,
        probe_every=min(PROBE_EVERY, args.steps),
        reuse=args.summarize,
    )
    runs = results["runs"]
    summary = summarize_conditions(
        runs, conditions, ["reward", "grad_norm", "num_tokens"], PROBE_KEYS, args.steps
    )
    plot = plot_curves(
        output / "loss_masking.png",
        [
            ("reward (train batch)", {n: stack(runs[n], "reward") for n in conditions}),
            ("update grad norm (pre-clip)", {n: stack(runs[n], "grad_norm") for n in conditions}),
        ],
        title=f"{setup.title}, GRPO, env tokens masked vs trained on; mean +-1 std "
        f"over {len(args.seeds)} seeds",
    )
    write_results(
        output / "loss_masking.json",
        {
            "finding": "Search-R1 / R1-Code-Interpreter: masking env tokens out of the loss "
            "changes learning; share of the gradient env tokens take when unmasked",
            "env": {"name": args.env, "id": setup.warm.env_id, "kwargs": setup.warm.env_kwargs},
            "seeds": args.seeds,
            "steps": args.steps,
            "config": config,
            "warm_start": results["warm_start"],
            "summary": summary,
            "histories": trim(
                runs,
                ["reward", "success", "grad_norm", "num_tokens", "episode_tokens", *PROBE_KEYS],
            ),
        },
    )
    for name in conditions:
        reward, share = summary[name]["reward"], summary[name].get("probe/env_grad_share", {})
        print(
            f"{name}: train reward {reward['first_steps']['mean']:.3f} -> "
            f"{reward['last_steps']['mean']:.3f} (+-{reward['last_steps']['std']:.3f}); "
            f"env share of the gradient {share.get('start', {}).get('mean', float('nan')):.2f}"
        )
    print(f"results in {output}; plot: {plot}")
    return summary


if __name__ == "__main__":
    main()
