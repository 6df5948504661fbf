"""GEM §4.2 in miniature: a discount gamma < 1 drives guess-the-number toward binary search.

On ``game:GuessTheNumber-v0`` (reward 1 for the hit and 0 otherwise) every win is worth the
same with gamma = 1, however many guesses it took; with gamma < 1 the return of a turn is
``gamma ** (turns left)``, so quicker wins are worth more and the policy should move toward
binary search.

A tiny policy per seed (2-layer Qwen2, tokenizer trained on the env's texts) is warm-started
with a short SFT on :class:`CautiousSearch` (by default; ``--expert oracle`` uses the
binary-search oracle), which wins nearly every game in about 1.2 more guesses than binary
search on the default 1..20 with 12 turns. Each gamma then trains with REINFORCE + return
batch normalisation (ReBN, GEM's estimator) from the same warm start. Recorded per step:
mean turns and success of the training batch; every ``PROBE_EVERY`` steps: success, turns
and turns of the won games on 64 held-out secrets.

    python examples/science/discount_turns.py --seeds 0 1 2 --steps 40 --jobs 2
    python examples/science/discount_turns.py --max-number 50 --max-turns 20 --expert oracle
"""

from __future__ import annotations

import argparse
import re
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

from palaestra.agents import Action, Conversation

ENV_ID = "game:GuessTheNumber-v0"
ENV_KWARGS = {"min_number": 1, "max_number": 20, "max_turns": 12}
"""The default game; --max-number and --max-turns change it."""
GAMMAS = {"gamma=1.0": 1.0, "gamma=0.9": 0.9, "gamma=0.7": 0.7}
PROBE_EVERY = 10
DEFAULT_OUTPUT = Path("runs/science/discount_turns")


def base_config(steps: int, env_kwargs: dict) -> dict:
    """ReBN, 8 secrets x 4 games per step, lr 1e-4 (5e-4 destabilised the warm start)."""
    return {
        "steps": steps,
        "eval_episodes": 64,
        "rollout": {
            "env_id": ENV_ID,
            "env_kwargs": env_kwargs,
            "group_size": 4,
            "groups_per_step": 8,
            "max_new_tokens": 12,
            "concurrency": 64,
        },
        "advantage": {"estimator": "rebn"},
        "optim": {"lr": 1e-4, "warmup_steps": 3, "adam_eps": 1e-5},
        "update": {"micro_batch_size": 32},
    }


class CautiousSearch:
    """A slower expert for the warm start: in the interval the feedback leaves open, guess
    its midpoint with probability ``midpoint_p``, else the point ``1 / fraction`` of the way
    up. It always narrows the interval, so it wins, in more guesses than binary search; a
    policy that imitates it has a choice that only the discount makes worth changing.
    The interval comes from the conversation (the task's range, then "too low" / "too high").
    """

    name = "cautious-search"

    def __init__(self, midpoint_p: float = 0.3, fraction: int = 8):
        self.midpoint_p = midpoint_p
        self.fraction = fraction

    def act(self, conversation: Conversation) -> Action:
        state, observation = conversation.state, conversation.last_observation
        if "low" not in state:
            low, high = re.search(r"between (-?\d+) and (-?\d+)", observation).groups()
            state.update(low=int(low), high=int(high))
        elif "too low" in observation:
            state["low"] = state["guess"] + 1
        elif "too high" in observation:
            state["high"] = state["guess"] - 1
        low, high = state["low"], state["high"]
        if conversation.rng.random() < self.midpoint_p:
            state["guess"] = (low + high) // 2
        else:
            state["guess"] = low + (high - low) // self.fraction
        return Action("\\boxed{" + str(state["guess"]) + "}")


def binary_search_turns(low: int, high: int) -> float:
    """Mean guesses of midpoint binary search (the env's oracle) over every secret."""
    total = 0
    for secret in range(low, high + 1):
        lo, hi, guesses = low, high, 1
        while (guess := (lo + hi) // 2) != secret:
            lo, hi = (guess + 1, hi) if guess < secret else (lo, guess - 1)
            guesses += 1
        total += guesses
    return total / (high - low + 1)


def game_options(parser: argparse.ArgumentParser) -> None:
    """This script's own options: the range and the turn limit of the game."""
    parser.add_argument("--max-number", type=int, default=ENV_KWARGS["max_number"])
    parser.add_argument("--max-turns", type=int, default=ENV_KWARGS["max_turns"])
    parser.add_argument(
        "--expert",
        choices=["cautious", "oracle"],
        default="cautious",
        help="warm-start demonstrations: CautiousSearch, or the binary-search oracle",
    )


def main(argv: list[str] | None = None) -> dict:
    """Run the experiment; returns the summary written to the results JSON."""
    args = parse_args(__doc__.splitlines()[0], steps=40, argv=argv, extra=game_options)
    env_kwargs = {**ENV_KWARGS, "max_number": args.max_number, "max_turns": args.max_turns}
    config = config_from_args(base_config(args.steps, env_kwargs), args)
    expert = CautiousSearch() if args.expert == "cautious" else None
    warm = warm_start_from_args(WarmStart(ENV_ID, env_kwargs, sft_steps=60, expert=expert), args)
    output = Path(args.output_dir or DEFAULT_OUTPUT)
    conditions = {name: {"advantage": {"gamma": gamma}} for name, gamma in GAMMAS.items()}
    results = run_experiment(
        warm,
        config,
        conditions,
        args.seeds,
        output,
        jobs=args.jobs,
        probe=held_out,
        probe_every=min(PROBE_EVERY, args.steps),
        reuse=args.summarize,
    )
    optimum = binary_search_turns(env_kwargs["min_number"], env_kwargs["max_number"])
    runs = results["runs"]
    summary = summarize_conditions(
        runs,
        conditions,
        ["turns", "success", "reward"],
        ["eval/turns", "eval/turns_won", "eval/success"],
        args.steps,
    )
    plot = plot_curves(
        output / "discount_turns.png",
        [
            ("turns per episode", {name: stack(runs[name], "turns") for name in conditions}),
            ("success", {name: stack(runs[name], "success") for name in conditions}),
        ],
        title=f"GuessTheNumber 1..{args.max_number} ({args.max_turns} turns), ReBN; "
        f"mean +-1 std over {len(args.seeds)} seeds",
        hlines={"turns per episode": (optimum, f"binary search ({optimum:.2f})")},
    )
    write_results(
        output / "discount_turns.json",
        {
            "finding": "GEM 4.2: gamma < 1 drives turns toward binary search; gamma = 1 does not",
            "env": {"id": ENV_ID, "kwargs": env_kwargs},
            "binary_search_mean_turns": optimum,
            "seeds": args.seeds,
            "steps": args.steps,
            "config": config,
            "warm_start": results["warm_start"],
            "summary": summary,
            "histories": trim(
                runs,
                [
                    "turns",
                    "success",
                    "reward",
                    "grad_norm",
                    "eval/turns",
                    "eval/turns_won",
                    "eval/success",
                    "eval/reward",
                ],
            ),
        },
    )
    for name in conditions:
        turns, won = summary[name]["turns"], summary[name].get("eval/turns_won", {})
        print(
            f"{name}: train turns {turns['first_steps']['mean']:.2f} -> "
            f"{turns['last_steps']['mean']:.2f} (+-{turns['last_steps']['std']:.2f}); "
            f"held-out turns of wins {won.get('start', {}).get('mean', float('nan')):.2f} -> "
            f"{won.get('end', {}).get('mean', float('nan')):.2f}"
        )
    print(f"binary search: {optimum:.2f} turns; results in {output}; plot: {plot}")
    return summary


if __name__ == "__main__":
    main()
