"""Countdown (the numbers game): combine the given numbers with + - * / to hit the target."""

from __future__ import annotations

import ast
import functools
import itertools
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"count": 3, "small": 3, "target": (10, 60), "attempts": 3},
    "medium": {"count": 4, "small": 3, "target": (50, 300), "attempts": 3},
    "hard": {"count": 5, "small": 3, "target": (100, 999), "attempts": 3},
}
LARGE = (25, 50, 75, 100)
MAX_EXPRESSION_CHARS = 200
SYSTEM_PROMPT = (
    "You are playing the Countdown numbers game. Think step by step, then give one arithmetic "
    "expression inside \\boxed{}, using each given number at most once with + - * / and "
    "parentheses, for example \\boxed{(25 - 3) * 4}."
)


@functools.lru_cache(maxsize=4096)
def _reachable(numbers: tuple[int, ...]) -> dict[int, str]:
    """Every value some expression over a sub-multiset of ``numbers`` reaches (Countdown
    rules: every intermediate result a positive integer), with one expression for each."""
    if len(numbers) == 1:
        return {numbers[0]: str(numbers[0])}
    found: dict[int, str] = {}
    indices = range(len(numbers))
    for size in range(1, len(numbers) // 2 + 1):
        for left in itertools.combinations(indices, size):
            right = tuple(i for i in indices if i not in left)
            if size * 2 == len(numbers) and left > right:
                continue
            a_values = _reachable(tuple(sorted(numbers[i] for i in left)))
            b_values = _reachable(tuple(sorted(numbers[i] for i in right)))
            for a, a_text in a_values.items():
                found.setdefault(a, a_text)
                for b, b_text in b_values.items():
                    found.setdefault(b, b_text)
                    for value, text in _combine(a, a_text, b, b_text):
                        found.setdefault(value, text)
    return found


def _combine(a: int, a_text: str, b: int, b_text: str) -> list[tuple[int, str]]:
    out = [(a + b, f"({a_text} + {b_text})"), (a * b, f"({a_text} * {b_text})")]
    high, high_text, low, low_text = (a, a_text, b, b_text) if a >= b else (b, b_text, a, a_text)
    if high > low:
        out.append((high - low, f"({high_text} - {low_text})"))
    if low and high % low == 0:
        out.append((high // low, f"({high_text} / {low_text})"))
    return out


def best_reachable(numbers: tuple[int, ...], target: int) -> tuple[int, str]:
    """The reachable value closest to ``target`` (the smaller one on ties) and an expression."""
    values = _reachable(tuple(sorted(numbers)))
    value = min(values, key=lambda v: (abs(v - target), v))
    expression = values[value]
    return value, expression[1:-1] if expression.startswith("(") else expression


class ExpressionError(ValueError):
    """An answer that is not a valid Countdown expression; the message says why."""


def evaluate(expression: str, numbers: tuple[int, ...]) -> int:
    """The value of ``expression`` under Countdown rules (only + - * /, each given number at
    most once, every intermediate result a positive integer); parsed with :mod:`ast`, never
    ``eval``."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError("the expression is too long")
    text = expression.replace("×", "*").replace("÷", "/").replace("x", "*")
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ExpressionError("that is not an arithmetic expression") from None
    used: list[int] = []

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(
            node.op, ast.Add | ast.Sub | ast.Mult | ast.Div
        ):
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                result = a + b
            elif isinstance(node.op, ast.Sub):
                result = a - b
            elif isinstance(node.op, ast.Mult):
                result = a * b
            else:
                if b == 0 or a % b:
                    raise ExpressionError(f"{a} / {b} is not a whole number")
                result = a // b
            if result <= 0:
                raise ExpressionError(f"an intermediate result ({result}) is not positive")
            return result
        raise ExpressionError("only numbers, + - * / and parentheses are allowed")

    try:
        result = value(tree)
    except RecursionError:
        raise ExpressionError("the expression is nested too deeply") from None
    left = list(numbers)
    for number in used:
        if number not in left:
            raise ExpressionError(f"{number} is not one of the numbers left to use")
        left.remove(number)
    return result


class Countdown(TurnBasedEnv):
    """Reach the target with the given numbers (``count`` of them: ``small`` drawn from 1-10,
    the rest from 25, 50, 75, 100), each used at most once.

    With ``exact=True`` (the default) every target has an exact solution; with ``exact=False``
    the target is drawn without one guaranteed, and the goal is the closest reachable value
    (a solver finds it). Reward: 1 for an expression that reaches the best reachable value
    (the target itself when exact), 0 otherwise; a wrong answer gets its value and distance
    back and another attempt, up to ``attempts``; an invalid expression (a number used twice,
    a fraction, anything but + - * /) costs an attempt. ``shaping > 0`` adds a
    potential-based reward for each answer that comes closer to the target than any before,
    which sums to ``shaping`` over any win.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        exact: bool = True,
        attempts: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.preset = difficulty_preset(PRESETS, difficulty)
        self.exact = exact
        self.max_turns = self.preset["attempts"] if attempts is None else attempts
        if self.max_turns < 1 or shaping < 0:
            raise ValueError("attempts must be >= 1 and shaping >= 0")
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.numbers: tuple[int, ...] = ()
        self.target = 0
        self.best_value, self.solution = 0, ""
        self._closest = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        count, small = self.preset["count"], self.preset["small"]
        low, high = self.preset["target"]
        while True:
            numbers = [int(v) for v in self.np_random.integers(1, 11, size=small)]
            numbers += [
                LARGE[int(i)] for i in self.np_random.integers(len(LARGE), size=count - small)
            ]
            self.numbers = tuple(numbers)
            self.target = int(self.np_random.integers(low, high + 1))
            self.best_value, self.solution = best_reachable(self.numbers, self.target)
            if not self.exact or self.best_value == self.target:
                break
        self._closest = abs(self.target)  # distance of the best answer so far (none yet)
        self.start()
        goal = "" if self.exact else " If it cannot be reached exactly, get as close as possible."
        task = (
            f"Numbers: {', '.join(map(str, self.numbers))}. Target: {self.target}.{goal} Use each "
            f"number at most once with + - * / (every intermediate result a positive whole "
            f"number) and give one expression inside \\boxed{{}}; you have {self.max_turns} "
            "attempts."
        )
        return task, {"role": "user"}

    def _potential(self, distance: int) -> float:
        gap = abs(self.target - self.best_value)
        return -(distance - gap) / max(abs(self.target) - gap, 1)

    def play(self, action: str) -> StepResult:
        expression = parse_move(action)
        gain = 0.0
        if expression is None:
            feedback = "I could not read an expression: give it inside \\boxed{}."
        else:
            try:
                result = evaluate(expression, self.numbers)
            except ExpressionError as error:
                feedback = f"Invalid: {error}."
            else:
                distance = abs(result - self.target)
                if distance < self._closest:
                    gain = self.shaping * (
                        self._potential(distance) - self._potential(self._closest)
                    )
                    self._closest = distance
                if distance == abs(self.best_value - self.target):
                    return self.finish(f"{result}: the best possible. Well done.", 1.0 + gain, True)
                feedback = f"That makes {result}, {distance} away from {self.target}."
        if self.turns_left() == 0:
            return self.finish(
                f"{feedback} No attempts left; {self.solution} = {self.best_value}.", gain, False
            )
        return self.proceed(f"{feedback} {self.turns_left()} attempt(s) left.", gain)

    def oracle(self) -> Policy:
        """An expression for the best reachable value, from the solver."""
        return lambda observation: "\\boxed{" + self.solution + "}"

    def random_action(self, rng: np.random.Generator) -> str:
        a, b = (
            rng.choice(len(self.numbers), size=2, replace=False)
            if len(self.numbers) > 1
            else (0, 0)
        )
        return f"\\boxed{{{self.numbers[int(a)]} + {self.numbers[int(b)]}}}"

    def render_text(self) -> str:
        return f"numbers {self.numbers}, target {self.target}, attempt {self.turn}/{self.max_turns}"
