"""Stdin/stdout tests graded per second: palaestra's code grader vs LiveCodeBench's harness.

The peer is LiveCodeBench's way of grading (``lcb_runner/evaluation/testing_util.py``,
rewritten here from reading it): one forked process per problem, in which the program is
compiled once as a function and run on every test with ``sys.stdin`` replaced by the test's
input, stdout captured, an alarm per test, outputs compared as stripped lines with a
decimal fallback, and the first failure ending the problem. It confines nothing; palaestra
runs every test as its own confined program in the warm-pool sandbox (``stop_early=True``,
LiveCodeBench's all-or-nothing). Both grade the same correct programs, one after the other
in the same process, at concurrency 1 and 8 (problems graded in parallel threads), in
interleaved rounds, medians reported.

    python benchmarks/bench_code_vs_lcb.py --problems 16 --tests 10 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import signal
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, InvalidOperation

from palaestra.envs.code.problems import CodeProblem
from palaestra.sandboxes import LocalSandbox
from palaestra.verifiers.code import grade

PROGRAM = "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs))\nprint(max(xs))\n"
Grader = Callable[[CodeProblem, str], bool]


def make_problems(count: int, tests: int) -> list[CodeProblem]:
    """``count`` sum-and-max problems of ``tests`` cases each (inputs of 50 ints)."""
    problems = []
    for p in range(count):
        cases = []
        for t in range(tests):
            xs = [(p * 7919 + t * 104729 + i * 31) % 1000 - 500 for i in range(50)]
            cases.append((f"50\n{' '.join(map(str, xs))}\n", f"{sum(xs)}\n{max(xs)}\n"))
        problems.append(CodeProblem(f"bench/{p}", "sum and max", "stdio", cases=cases))
    return problems


# -- the LiveCodeBench-style peer ----------------------------------------------------------


def lcb_lines_equal(output: str, expected: str) -> bool:
    """Stripped lines equal, or every line's tokens equal as decimals."""
    got, want = output.strip().split("\n"), expected.strip().split("\n")
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g.strip() == w.strip():
            continue
        try:
            if [Decimal(x) for x in g.split()] != [Decimal(x) for x in w.split()]:
                return False
        except InvalidOperation:
            return False
    return True


def _alarm(signum: int, frame: object) -> None:
    raise TimeoutError


def _lcb_child(code: str, cases: list[tuple[str, str]], timeout: int, results: object) -> None:
    """In the forked process: the program as a function, run on each input in turn."""
    body = "\n".join("    " + line for line in code.splitlines())
    namespace: dict = {}
    exec(compile(f"def wrapped_function():\n{body}\n", "<solution>", "exec"), namespace)
    signal.signal(signal.SIGALRM, _alarm)
    for stdin, expected in cases:
        sys.stdin, captured = io.StringIO(stdin), io.StringIO()
        signal.alarm(timeout)
        try:
            with contextlib.redirect_stdout(captured):
                namespace["wrapped_function"]()
        except BaseException:
            results.append(False)
            return
        finally:
            signal.alarm(0)
        ok = lcb_lines_equal(captured.getvalue(), expected)
        results.append(ok)
        if not ok:
            return


def lcb_grade(problem: CodeProblem, code: str, timeout: int = 6) -> bool:
    """One forked process per problem, as LiveCodeBench's ``check_correctness``."""
    context = multiprocessing.get_context("fork")
    with context.Manager() as manager:
        results = manager.list()
        process = context.Process(target=_lcb_child, args=(code, problem.cases, timeout, results))
        process.start()
        process.join(timeout=(timeout + 1) * len(problem.cases) + 5)
        if process.is_alive():
            process.kill()
        return len(results) == len(problem.cases) and all(results)


# -- measurement -----------------------------------------------------------------------------


def tests_per_second(grader: Grader, problems: list[CodeProblem], concurrency: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        verdicts = list(pool.map(lambda p: grader(p, PROGRAM), problems))
    elapsed = time.perf_counter() - started
    assert all(verdicts), "a correct program was rejected"
    return sum(p.num_tests for p in problems) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    problems = make_problems(args.problems, args.tests)
    with LocalSandbox(pool_size=8) as sandbox:
        sandbox.warm()
        graders: dict[str, Grader] = {
            "palaestra": lambda p, c: grade(sandbox, p, c, stop_early=True).all_passed,
            "LiveCodeBench-style": lcb_grade,
        }
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for concurrency in (1, 8):
                for name, grader in graders.items():
                    rate = tests_per_second(grader, problems, concurrency)
                    rates.setdefault((name, concurrency), []).append(rate)
    print(f"{args.problems} problems x {args.tests} stdin/stdout tests, {args.rounds} rounds")
    print("| grader | concurrency | tests/s (median) | ratio |")
    print("|---|---|---|---|")
    for concurrency in (1, 8):
        peer = statistics.median(rates[("LiveCodeBench-style", concurrency)])
        for name in graders:
            rate = statistics.median(rates[(name, concurrency)])
            print(f"| {name} | {concurrency} | {rate:.1f} | {rate / peer:.2f}x |")


if __name__ == "__main__":
    main()
