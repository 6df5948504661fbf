"""Procedurally generated math problems with difficulty knobs, one item per seed.

Every number comes from ``self.np_random`` (seeded by ``reset(seed=...)``), answers are
computed exactly with :class:`fractions.Fraction`, and each env has an oracle.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from palaestra.envs.base import difficulty_preset
from palaestra.envs.math._base import MathEnv
from palaestra.tasks import Problem


def format_fraction(value: Fraction) -> str:
    """``3`` for integers, else ``a/b`` in lowest terms (sign on the numerator)."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    return int(rng.integers(low, high + 1))


class ProceduralMathEnv(MathEnv):
    """A generator with difficulty presets (``easy``/``medium``/``hard``) whose knobs can be
    overridden one by one: ``Arithmetic("hard", num_terms=8)``.

    Each problem is drawn from ``self.np_random`` (seeded by the reset seed); its
    ``data["program"]`` is a Python program that prints the answer.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_attempts: int = 1,
        attempt_cost: float = 0.0,
        render_mode: str | None = None,
        **knobs: Any,
    ):
        super().__init__(
            max_attempts=max_attempts, attempt_cost=attempt_cost, render_mode=render_mode
        )
        preset = difficulty_preset(self.PRESETS, difficulty)
        unknown = set(knobs) - set(preset)
        if unknown:
            raise TypeError(
                f"unknown {type(self).__name__} knobs {sorted(unknown)}; choose from {sorted(preset)}"
            )
        self.difficulty = difficulty
        self.configure(**{**preset, **knobs})

    def configure(self, **knobs: Any) -> None:
        """Validate and store the knobs (subclasses name theirs as keyword parameters)."""
        raise NotImplementedError

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        return self.generate(self.np_random)

    def generate(self, rng: np.random.Generator) -> Problem:
        """A new problem drawn from ``rng``."""
        raise NotImplementedError


class Arithmetic(ProceduralMathEnv):
    """Evaluate an integer expression with ``+ - *`` (and parentheses when ``nested``).

    Knobs: ``num_terms``, ``max_value``, ``operators``, ``nested``.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"num_terms": 2, "max_value": 20, "operators": "+-", "nested": False},
        "medium": {"num_terms": 3, "max_value": 100, "operators": "+-*", "nested": False},
        "hard": {"num_terms": 5, "max_value": 1000, "operators": "+-*", "nested": True},
    }

    def configure(self, **config: Any) -> None:
        self.num_terms = int(config["num_terms"])
        self.max_value = int(config["max_value"])
        self.operators = str(config["operators"])
        self.nested = bool(config["nested"])
        if (
            self.num_terms < 2
            or self.max_value < 1
            or not set(self.operators) <= set("+-*")
            or not self.operators
        ):
            raise ValueError("need num_terms >= 2, max_value >= 1 and operators drawn from '+-*'")

    def generate(self, rng: np.random.Generator) -> Problem:
        expression = str(_int(rng, 1, self.max_value))
        for _ in range(self.num_terms - 1):
            op = self.operators[int(rng.integers(len(self.operators)))]
            expression = f"{expression} {op} {_int(rng, 1, self.max_value)}"
            if self.nested and rng.random() < 0.5:
                expression = f"({expression})"
        value = _evaluate(expression)
        data = {"expression": expression, "program": f"print({expression})"}
        return Problem(f"Compute {expression}.", str(value), data=data)


def _evaluate(expression: str) -> int:
    """Exact value of a generated ``+ - *`` expression (no eval of untrusted text: we built it)."""
    tokens = expression.replace("(", " ( ").replace(")", " ) ").split()
    position = 0

    def term() -> int:
        nonlocal position
        value = factor()
        while position < len(tokens) and tokens[position] == "*":
            position += 1
            value *= factor()
        return value

    def factor() -> int:
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "(":
            value = expr()
            position += 1  # ")"
            return value
        return int(token)

    def expr() -> int:
        nonlocal position
        value = term()
        while position < len(tokens) and tokens[position] in "+-":
            op = tokens[position]
            position += 1
            value = value + term() if op == "+" else value - term()
        return value

    return expr()


class Fractions(ProceduralMathEnv):
    """Combine ``num_operands`` fractions with ``+ - * /``; answer in lowest terms.

    Knobs: ``num_operands``, ``max_denominator``, ``operators``.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"num_operands": 2, "max_denominator": 6, "operators": "+-"},
        "medium": {"num_operands": 2, "max_denominator": 12, "operators": "+-*/"},
        "hard": {"num_operands": 3, "max_denominator": 20, "operators": "+-*/"},
    }

    def configure(self, **config: Any) -> None:
        self.num_operands = int(config["num_operands"])
        self.max_denominator = int(config["max_denominator"])
        self.operators = str(config["operators"])
        if (
            self.num_operands < 2
            or self.max_denominator < 2
            or not set(self.operators) <= set("+-*/")
        ):
            raise ValueError("need num_operands >= 2, max_denominator >= 2, operators from '+-*/'")

    def _fraction(self, rng: np.random.Generator) -> Fraction:
        den = _int(rng, 2, self.max_denominator)
        return Fraction(_int(rng, 1, den * 2), den)

    def generate(self, rng: np.random.Generator) -> Problem:
        value = self._fraction(rng)
        text, python = _latex(value), _python(value)
        for index in range(self.num_operands - 1):
            op = self.operators[int(rng.integers(len(self.operators)))]
            operand = self._fraction(rng)
            value = {
                "+": value + operand,
                "-": value - operand,
                "*": value * operand,
                "/": value / operand,
            }[op]
            symbol = {"+": "+", "-": "-", "*": "\\times", "/": "\\div"}[op]
            if index > 0:  # make the order of operations explicit
                text = f"\\left({text}\\right)"
            text = f"{text} {symbol} {_latex(operand)}"
            python = f"({python} {op} {_python(operand)})"
        question = f"Compute ${text}$ and simplify the result to lowest terms."
        program = f"from fractions import Fraction\nprint({python})"
        return Problem(question, format_fraction(value), data={"value": value, "program": program})


def _python(value: Fraction) -> str:
    return f"Fraction({value.numerator}, {value.denominator})"


def _latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


class LinearEquation(ProceduralMathEnv):
    """Solve ``a x + b = c x + d`` for x; integer solutions unless ``fractional``.

    Knobs: ``max_coefficient``, ``both_sides`` (x on both sides), ``fractional`` solutions.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"max_coefficient": 10, "both_sides": False, "fractional": False},
        "medium": {"max_coefficient": 20, "both_sides": True, "fractional": False},
        "hard": {"max_coefficient": 50, "both_sides": True, "fractional": True},
    }

    def configure(self, **config: Any) -> None:
        self.max_coefficient = int(config["max_coefficient"])
        self.both_sides = bool(config["both_sides"])
        self.fractional = bool(config["fractional"])
        if self.max_coefficient < 2:
            raise ValueError(f"max_coefficient must be >= 2, got {self.max_coefficient}")

    def generate(self, rng: np.random.Generator) -> Problem:
        m = self.max_coefficient
        c = _int(rng, -m, m) if self.both_sides else 0
        a = c
        while a == c:
            a = _int(rng, -m, m)
        if self.fractional:
            x = Fraction(_int(rng, -m, m), _int(rng, 2, 9))
        else:
            x = Fraction(_int(rng, -m, m))
        b = _int(rng, -m * 2, m * 2)
        d_value = (a - c) * x + b  # a x + b = c x + d  =>  d = (a - c) x + b
        if d_value.denominator != 1:  # keep the written equation integral: scale everything
            scale = d_value.denominator
            a, b, c, d_value = a * scale, b * scale, c * scale, d_value * scale
        d = int(d_value)
        question = f"Solve for $x$: ${_side(a, b)} = {_side(c, d)}$."
        program = f"from fractions import Fraction\nprint(Fraction({d} - ({b}), {a} - ({c})))"
        data = {"a": a, "b": b, "c": c, "d": d, "program": program}
        return Problem(question, format_fraction(x), data=data)


def _side(coefficient: int, constant: int) -> str:
    if coefficient == 0:
        return str(constant)
    x_term = {1: "x", -1: "-x"}.get(coefficient, f"{coefficient}x")
    if constant == 0:
        return x_term
    return f"{x_term} {'+' if constant > 0 else '-'} {abs(constant)}"


_NAMES = ("Ada", "Ben", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Jia")
_ITEMS = ("apples", "pencils", "stickers", "marbles", "books", "cookies")


class WordProblem(ProceduralMathEnv):
    """Short word problems (shopping, sharing, travel, savings) with ``steps`` operations.

    Knobs: ``max_value`` (size of the numbers), ``steps`` (1-3 chained operations).
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"max_value": 20, "steps": 1},
        "medium": {"max_value": 100, "steps": 2},
        "hard": {"max_value": 1000, "steps": 3},
    }

    def configure(self, **config: Any) -> None:
        self.max_value = int(config["max_value"])
        self.steps = int(config["steps"])
        if self.max_value < 4 or not 1 <= self.steps <= 3:
            raise ValueError("need max_value >= 4 and 1 <= steps <= 3")

    def generate(self, rng: np.random.Generator) -> Problem:
        m = self.max_value
        name = _NAMES[int(rng.integers(len(_NAMES)))]
        item = _ITEMS[int(rng.integers(len(_ITEMS)))]
        kind = int(rng.integers(4))
        if kind == 0:  # shopping
            count, price = _int(rng, 2, m // 2), _int(rng, 1, 20)
            sentences = [f"{name} buys {count} {item} at {price} dollars each."]
            total, program = count * price, f"{count} * {price}"
            question = "How many dollars does " + name + " spend?"
            if self.steps >= 2:
                extra = _int(rng, 1, m)
                sentences.append(f"Then {name} pays {extra} dollars for shipping.")
                total, program = total + extra, f"{program} + {extra}"
            if self.steps >= 3:
                coupon = _int(rng, 1, total)
                sentences.append(f"A coupon takes {coupon} dollars off the bill.")
                total, program = total - coupon, f"{program} - {coupon}"
        elif kind == 1:  # sharing
            friends = _int(rng, 2, 9)
            each = _int(rng, 1, m // 2)
            sentences = [f"{name} shares {friends * each} {item} equally among {friends} friends."]
            program = f"{friends * each} // {friends}"
            question = f"How many {item} does each friend get?"
            if self.steps >= 2:
                kept = _int(rng, 1, each)
                sentences.append(f"Each friend then gives {kept} of theirs away.")
                each, program = each - kept, f"{program} - {kept}"
            if self.steps >= 3:
                bonus = _int(rng, 1, m)
                sentences.append(f"Afterwards each friend receives {bonus} more.")
                each, program = each + bonus, f"{program} + {bonus}"
            total = each
        elif kind == 2:  # travel
            speed, hours = _int(rng, 2, m), _int(rng, 1, 9)
            sentences = [f"{name} drives at {speed} km per hour for {hours} hours."]
            total, program = speed * hours, f"{speed} * {hours}"
            question = f"How many kilometres does {name} travel in total?"
            if self.steps >= 2:
                more = _int(rng, 1, 5)
                sentences.append(
                    f"After a break {name} drives {more} more hours at the same speed."
                )
                total, program = total + speed * more, f"{program} + {speed} * {more}"
            if self.steps >= 3:
                back = _int(rng, 1, total)
                sentences.append(f"Then {name} drives {back} km back towards the start.")
                question = f"How far from the start is {name} at the end, in kilometres?"
                total, program = total - back, f"{program} - {back}"
        else:  # savings
            start, weekly, weeks = _int(rng, 0, m), _int(rng, 1, m // 4 + 1), _int(rng, 1, 12)
            sentences = [
                f"{name} has {start} dollars and saves {weekly} dollars every week for {weeks} weeks."
            ]
            total, program = start + weekly * weeks, f"{start} + {weekly} * {weeks}"
            question = f"How many dollars does {name} have then?"
            if self.steps >= 2:
                spend = _int(rng, 0, total)
                sentences.append(f"Then {name} spends {spend} dollars on a gift.")
                total, program = total - spend, f"{program} - {spend}"
            if self.steps >= 3:
                sentences.append(f"Finally a relative doubles what {name} has left.")
                total, program = total * 2, f"({program}) * 2"
        text = " ".join([*sentences, question])
        data = {
            "kind": ["shopping", "sharing", "travel", "savings"][kind],
            "program": f"print({program})",
        }
        return Problem(text, str(total), data=data)
