"""Math grading throughput and accuracy: palaestra vs math-verify called directly vs GEM.

All three graders run in one process, on the same inputs, in alternating order, so the
ratios hold even on a shared machine. Each round uses a fresh workload (no cache hits
across rounds); math-verify's in-process parse caches are cleared before every timed pass.
Each grader is also scored on the hand-written grading table and on the labelled public
cases in ``tests/verifiers/public_cases.jsonl`` (agreement, false positives, and checks/s
over that mixed, often long, set).

    python benchmarks/math_verify_throughput.py [--items 200] [--rounds 3]

Needs the ``bench`` extra and GEM (``pip install -e '.[bench]' && pip install --no-deps gem-llm``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

Grader = Callable[[str, str], float]
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def workload(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (completion, gold) pairs in a realistic mix, half of them correct."""
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(n):
        kind = rng.integers(5)
        a, b = int(rng.integers(1, 500)), int(rng.integers(2, 60))
        wrong = rng.random() < 0.5
        if kind == 0:  # integers, sometimes with thousands separators
            gold = str(a * 1000 + b)
            shown = f"{a},{b:03d}" if not wrong else str(a * 1000 + b + 1)
        elif kind == 1:  # fractions vs decimals
            value = Fraction(a, b)
            gold = f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
            shown = f"{float(value):.10g}" if not wrong else f"{float(value) + 0.5:.10g}"
        elif kind == 2:  # radicals
            gold = f"{b}\\sqrt{{2}}"
            shown = f"\\sqrt{{{2 * b * b}}}" if not wrong else f"\\sqrt{{{2 * b * b + 1}}}"
        elif kind == 3:  # polynomials
            gold = f"x^2 + {2 * b}x + {b * b}"
            shown = f"(x+{b})^2" if not wrong else f"(x+{b + 1})^2"
        else:  # intervals
            gold = f"[{b}, {a + b})"
            shown = gold.replace(" ", "") if not wrong else f"({b},{a + b}]"
        items.append(
            (f"Let me work it out step by step... so the answer is \\boxed{{{shown}}}.", gold)
        )
    return items


def make_graders() -> dict[str, Grader]:
    from gem.utils.math_grader import boxed_reward_fn
    from math_verify import parse, verify

    from palaestra.verifiers.math import verify as palaestra_verify

    def math_verify_direct(completion: str, gold: str) -> float:
        return float(verify(parse(f"${gold}$"), parse(completion)))

    def gem(completion: str, gold: str) -> float:
        return float(boxed_reward_fn(completion, gold, fast=False)[1])

    return {"palaestra": palaestra_verify, "math-verify": math_verify_direct, "gem": gem}


def clear_math_verify_caches() -> None:
    from math_verify import parser

    for name in ("parse_latex_cached", "parse_expr_cached"):
        getattr(parser, name).cache_clear()


def timed_pass(grader: Grader, items: list[tuple[str, str]]) -> float:
    clear_math_verify_caches()
    start = time.perf_counter()
    for completion, gold in items:
        grader(completion, gold)
    return len(items) / (time.perf_counter() - start)


def table_accuracy(grader: Grader) -> tuple[int, int]:
    """Agreement with the hand-written grading table."""
    from tests.verifiers.math_cases import ALL_CASES

    cases = [(completion, gold, expected) for completion, gold, expected in ALL_CASES]
    right, _, _ = agreement(grader, cases)
    return right, len(cases)


def public_accuracy(grader: Grader) -> tuple[int, int, int, float]:
    """Agreement with the labelled public cases: (right, total, false positives, checks/s)."""
    path = REPO / "tests" / "verifiers" / "public_cases.jsonl"
    cases = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        golds = case["gold"] if isinstance(case["gold"], list) else [case["gold"]]
        cases.append((case["completion"], golds, case["label"]))
    start = time.perf_counter()
    right, false_positives, _ = agreement(
        lambda completion, golds: max(grader(completion, g) for g in golds), cases
    )
    return right, len(cases), false_positives, len(cases) / (time.perf_counter() - start)


def agreement(grader: Callable, cases: list[tuple]) -> tuple[int, int, int]:
    """(agreeing verdicts, false positives, errors); a grader that raises got it wrong."""
    right = false_positives = errors = 0
    for completion, gold, expected in cases:
        try:
            score = grader(completion, gold)
        except Exception:
            errors += 1
            continue
        right += score == expected
        false_positives += score == 1 and expected == 0
    return right, false_positives, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200, help="inputs per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    graders = make_graders()
    warm = workload(20, seed=10_000)
    for grader in graders.values():
        timed_pass(grader, warm)

    names = list(graders)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(args.rounds):
        items = workload(args.items, seed=round_index)
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            rates[name].append(timed_pass(graders[name], items))

    print(f"{args.items} inputs x {args.rounds} rounds (median checks/s, higher is better)")
    base = statistics.median(rates["math-verify"])
    for name in names:
        rate = statistics.median(rates[name])
        right, total = table_accuracy(graders[name])
        public_right, public_total, false_positives, public_rate = public_accuracy(graders[name])
        print(
            f"  {name:12s} {rate:9.1f} checks/s  x{rate / base:5.2f} vs math-verify   "
            f"grading table {right}/{total}   public cases {public_right}/{public_total} "
            f"({false_positives} false positives, {public_rate:.1f} checks/s)"
        )


if __name__ == "__main__":
    main()
