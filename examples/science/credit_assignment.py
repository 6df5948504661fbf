"""GEM §4.1 in miniature: with dense per-turn rewards, ReBN's per-turn returns learn at least
as fast as GRPO's one advantage per episode; with only a final reward the two are close.

Env: ``game:GuessTheNumber-v0`` (secret in 1..50, 10 guesses). "dense": ``shaping=1``, every
guess is also rewarded by the information it gains (``log(open range before / after) /
log(50)``; potential-based, so a win is worth 2 however it went); "final": reward 1 for the
hit only. Estimators, both with gamma = 1 so that only the credit assignment differs:

* ``rebn``: ``A_t = (G_t - mean G) / std G`` over every turn of the batch, ``G_t`` the
  return-to-go, so a guess is credited with its own and later rewards only;
* ``grpo``: ``A = (R - mean R_group) / std R_group`` over the 4 games of a secret, the same
  on every turn.

A tiny policy per seed is warm-started with a short SFT on the binary-search oracle (about
a third of its games won within 10 guesses); the four conditions start from it. Recorded
per step: success and reward of the training batch; every ``PROBE_EVERY`` steps: success
on 64 held-out secrets.

    python examples/science/credit_assignment.py --seeds 0 1 2 --steps 40 --jobs 2
"""

from __future__ import annotations

from pathlib import Path

from common import (
    WarmStart,
    config_from_args,
    held_out,
    parse_args,
    plot_curves,
    run_experiment,
    stack,
    summarize_conditions,
    trim,
    warm_start_from_args,
    write_results,
)

ENV_ID = "game:GuessTheNumber-v0"
ENV_KWARGS = {"min_number": 1, "max_number": 50, "max_turns": 10}
REWARDS = {"dense": {"shaping": 1.0}, "final": {"shaping": 0.0}}
ESTIMATORS = ("rebn", "grpo")
PROBE_EVERY = 10
WARM_START = WarmStart(ENV_ID, ENV_KWARGS, sft_steps=60)
DEFAULT_OUTPUT = Path("runs/science/credit_assignment")


def base_config(steps: int) -> dict:
    """8 secrets x 4 games per step, lr 3e-4, gamma 1."""
    return {
        "steps": steps,
        "eval_episodes": 64,
        "rollout": {
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "group_size": 4,
            "groups_per_step": 8,
            "max_new_tokens": 12,
            "concurrency": 64,
        },
        "optim": {"lr": 3e-4, "warmup_steps": 3, "adam_eps": 1e-5},
        "update": {"micro_batch_size": 32},
    }


def conditions() -> dict[str, dict]:
    """``{reward}/{estimator}`` -> the overrides of that run."""
    return {
        f"{reward}/{estimator}": {
            "rollout": {"env_kwargs": {**ENV_KWARGS, **kwargs}},
            "advantage": {"estimator": estimator},
        }
        for reward, kwargs in REWARDS.items()
        for estimator in ESTIMATORS
    }


def main(argv: list[str] | None = None) -> dict:
    """Run the experiment; returns the summary written to the results JSON."""
    args = parse_args(__doc__.splitlines()[0], steps=30, argv=argv)
    config = config_from_args(base_config(args.steps), args)
    output = Path(args.output_dir or DEFAULT_OUTPUT)
    runs_by_condition = conditions()
    results = run_experiment(
        warm_start_from_args(WARM_START, args),
        config,
        runs_by_condition,
        args.seeds,
        output,
        jobs=args.jobs,
        probe=held_out,
        probe_every=min(PROBE_EVERY, args.steps),
        reuse=args.summarize,
    )
    runs = results["runs"]
    summary = summarize_conditions(
        runs,
        runs_by_condition,
        ["success", "reward", "turns"],
        ["eval/success", "eval/reward"],
        args.steps,
    )
    panels = [
        (
            f"success ({reward} reward)",
            {e: stack(runs[f"{reward}/{e}"], "success") for e in ESTIMATORS},
        )
        for reward in REWARDS
    ]
    panels.append(("reward (dense)", {e: stack(runs[f"dense/{e}"], "reward") for e in ESTIMATORS}))
    plot = plot_curves(
        output / "credit_assignment.png",
        panels,
        title=f"GuessTheNumber 1..50 (10 turns), ReBN vs GRPO; mean +-1 std over "
        f"{len(args.seeds)} seeds",
    )
    write_results(
        output / "credit_assignment.json",
        {
            "finding": "GEM 4.1: with dense per-turn rewards ReBN learns at least as fast as "
            "GRPO; with a final reward only they are close",
            "env": {"id": ENV_ID, "kwargs": ENV_KWARGS, "rewards": REWARDS},
            "seeds": args.seeds,
            "steps": args.steps,
            "config": config,
            "conditions": runs_by_condition,
            "warm_start": results["warm_start"],
            "summary": summary,
            "histories": trim(
                runs, ["success", "reward", "turns", "grad_norm", "eval/success", "eval/reward"]
            ),
        },
    )
    for name in runs_by_condition:
        success = summary[name]["success"]
        print(
            f"{name}: train success {success['first_steps']['mean']:.3f} -> "
            f"{success['last_steps']['mean']:.3f} (+-{success['last_steps']['std']:.3f})"
        )
    print(f"results in {output}; plot: {plot}")
    return summary


if __name__ == "__main__":
    main()
