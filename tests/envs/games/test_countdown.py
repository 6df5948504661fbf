"""Countdown: the solver, safe expression evaluation, exact and closest targets."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from palaestra.envs.games.countdown import Countdown, ExpressionError, best_reachable, evaluate
from palaestra.testing import play


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_solves_every_seed_and_targets_are_exact(difficulty):
    env = Countdown(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True and env.best_value == env.target
        assert evaluate(env.solution, env.numbers) == env.target


def test_closest_variant_rewards_the_best_reachable_value():
    env = Countdown("medium", exact=False)
    inexact = 0
    for seed in range(100):
        assert play(env, seed)[-1][5] is True
        inexact += env.best_value != env.target
    assert inexact > 0  # some targets have no exact solution


def test_solver_is_exhaustive_on_small_sets():
    numbers = (2, 3, 7)
    values = set()
    for perm in itertools.permutations(numbers):
        for count in range(1, 4):
            for ops in itertools.product("+-*/", repeat=count - 1):
                for shape in ("flat", "right"):
                    terms = [str(n) for n in perm[:count]]
                    text = terms[0]
                    for op, term in zip(ops, terms[1:], strict=True):
                        text = (
                            f"({text} {op} {term})" if shape == "flat" else f"({term} {op} {text})"
                        )
                    with contextlib.suppress(ExpressionError):
                        values.add(evaluate(text, numbers))
    for target in range(1, 60):
        value, expression = best_reachable(numbers, target)
        assert evaluate(expression, numbers) == value
        assert abs(value - target) == min(abs(v - target) for v in values)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2 + 2", "not one of the numbers"),  # 2 used twice
        ("7 / 2", "not a whole number"),
        ("2 - 3", "not positive"),
        ("2 ** 3", "only numbers"),
        ("-2 + 7", "only numbers"),
        ("__import__('os').system('ls')", "only numbers"),
        ("2.5 * 2", "only numbers"),
        ("(" * 500 + "2" + ")" * 500, "too long"),
        ("2 +", "not an arithmetic expression"),
        ("9", "not one of the numbers"),
    ],
)
def test_invalid_expressions_are_refused_without_eval(expression, message):
    with pytest.raises(ExpressionError, match=message):
        evaluate(expression, (2, 3, 7))


def test_wrong_answers_get_their_value_and_another_attempt():
    env = Countdown("easy", attempts=2)
    env.reset(seed=0)
    a, b = env.numbers[:2]
    observation, reward, terminated, *_ = env.step(f"\\boxed{{{a} + {b}}}")
    if not terminated:
        assert f"That makes {a + b}" in observation and reward == 0.0
        observation, reward, terminated, _, info = env.step("\\boxed{nonsense}")
        assert terminated and "Invalid" in observation and info["success"] is False


def test_shaping_sums_to_its_weight_over_any_win():
    env = Countdown("medium", shaping=0.5, attempts=5)
    for seed in range(20):
        env.reset(seed=seed)
        a, b = env.numbers[:2]
        total = env.step(f"\\boxed{{{a} + {b}}}")[1]
        oracle, done = env.oracle(), False
        while not done:
            _, reward, done, _, info = env.step(oracle(""))
            total += reward
        assert info["success"] and total == pytest.approx(1.5)
