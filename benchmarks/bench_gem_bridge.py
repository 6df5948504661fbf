"""Cost of the GEM bridges: steps/s of an env with and without its adapter, side by side.

* GEM's guess-the-number (1..50) called directly vs through ``GemEnv`` (palaestra's API, with
  the private copy of the global random state swapped in around each call);
* palaestra's guess-the-number called directly vs through ``PalaestraGemEnv`` (GEM's API).

Each episode is a binary search (reset + about 5 steps); the rounds alternate the variants.

    python benchmarks/bench_gem_bridge.py --episodes 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import gem

import palaestra
from palaestra.integrations.gem import GemEnv, PalaestraGemEnv

Reset = Callable[[int], str]
Step = Callable[[str], tuple]


def episodes_per_second(reset: Reset, step: Step, episodes: int) -> float:
    started = time.perf_counter()
    for seed in range(episodes):
        observation = reset(seed)
        low, high = 1, 50
        while True:
            guess = (low + high) // 2
            observation, _, terminated, truncated, _ = step(rf"\boxed{{{guess}}}")
            if terminated or truncated:
                break
            if "higher" in observation:
                low = guess + 1
            else:
                high = guess - 1
    return episodes / (time.perf_counter() - started)


def variants() -> dict[str, tuple[Reset, Step]]:
    raw_gem = gem.make("game:GuessTheNumber-v0-hard")
    bridged_gem = GemEnv("game:GuessTheNumber-v0-hard")
    native = palaestra.make("game:GuessTheNumber-v0")
    in_gem = PalaestraGemEnv("game:GuessTheNumber-v0")
    return {
        "GEM env, direct": (lambda s: raw_gem.reset(seed=s)[0], raw_gem.step),
        "GEM env via GemEnv": (lambda s: bridged_gem.reset(seed=s)[0], bridged_gem.step),
        "palaestra env, direct": (lambda s: native.reset(seed=s)[0], native.step),
        "palaestra env via PalaestraGemEnv": (lambda s: in_gem.reset(seed=s)[0], in_gem.step),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    runs = variants()
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(options.rounds):
        for name, (reset, step) in runs.items():
            rates[name].append(episodes_per_second(reset, step, options.episodes))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print("| variant | episodes/s (median) | vs direct |\n| --- | ---: | ---: |")
    for name, rate in medians.items():
        base = medians["GEM env, direct" if name.startswith("GEM") else "palaestra env, direct"]
        print(f"| {name} | {rate:,.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
