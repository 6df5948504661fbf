r"""Clean-up and exact values of short math answers, in linear time and in-process.

:func:`clean_latex` removes presentation only (delimiters, spacing and sizing macros,
``\dfrac``, ``\text{}``, MATH's ``10,\!000``), so equal cleaned strings are equal answers;
:func:`normalize_answer` also drops what a plain-number comparison may ignore (units, degree
signs, ``x =``, thousands commas); :func:`parse_number` gives the exact value of a plain
numeric answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

MAX_FAST_NUMBER_CHARS = 200
"""Longer strings are never read as plain numbers."""

_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_MATH_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|,\\!\s*)(?=\d{3}(?!\d))")
_SPACE_THOUSANDS = re.compile(r"(?<=\d)\\[,;: ](?=\d{3}(?!\d))")
_SPACING = re.compile(r"(?<!\\)\\[!,;: ]|~")  # not the space after a row break \\
_SIZING = re.compile(r"\\(?:displaystyle|left|right|bigl|bigr|Bigl|Bigr)\b")
_TEXT_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|\\in)\s*(?=\S)")
_THOUSANDS = re.compile(r"^[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?(?=$|\s|%)")
_NUMBER_WITH_UNIT = re.compile(
    r"^(?P<number>[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?|\\frac\{\d+\}\{\d+\})%?)"
    r"(?:\s*(?P<words>[A-Za-z]{2,}(?:[\s.]+[A-Za-z]{2,})*)\.?|\s+[mgsLhKNJWVA])(?:\^\{?\d\}?)?$"
)
_NOT_UNITS = frozenset({"pi", "sqrt", "inf", "infty", "and", "or", "to", "cdot", "times"})
_CHOICE = re.compile(r"^\(?\s*([A-Ea-e])\s*\)?$")
_WHITESPACE = re.compile(r"\s+")


def clean_latex(answer: str) -> str:
    r"""Presentation-only clean-up: delimiters, spacing macros, ``\dfrac``, ``\text{}``.

    Nothing here changes what an answer means, so equal cleaned strings are equal answers.

    >>> clean_latex(r"$\left(\dfrac{1}{2}, 10{,}000\right)$")
    '(\\frac{1}{2}, 10,000)'
    """
    text = answer.strip().replace("\\$", "")
    text = _SPACE_THOUSANDS.sub("", _MATH_THOUSANDS.sub(",", text))
    text = _DELIMITERS.sub("", text)
    text = _SPACING.sub(" ", _SIZING.sub("", text))
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\%", "%")
    for _ in range(3):  # unwrap nested \text{\textbf{...}} a few levels deep
        text = _TEXT_WRAPPER.sub(r"\1", text)
    return _WHITESPACE.sub(" ", text).strip().rstrip(".").strip()


def normalize_answer(answer: str) -> str:
    r"""A canonical string form of a short answer, for the exact-number tier (linear time).

    On top of :func:`clean_latex`: degree signs, a single ``x =`` prefix, thousands commas
    (``1,000``; not ``0,111``), trailing unit words and choice letters (``(b)`` is ``B``).

    >>> normalize_answer(r"$x = \dfrac{3}{4}\text{ cm}$")
    '\\frac{3}{4}'
    """
    text = _DEGREES.sub("", clean_latex(answer)).strip()
    if text.count("=") == 1 or "\\in" in text:
        text = _ASSIGNMENT.sub("", text)
    head = _THOUSANDS.match(text)
    if head:
        text = head.group().replace(",", "") + text[head.end() :]
    unit = _NUMBER_WITH_UNIT.match(text)
    if unit and not _NOT_UNITS.intersection((unit.group("words") or "").lower().split()):
        text = unit.group("number")
    choice = _CHOICE.match(text)
    if choice:
        text = choice.group(1).upper()
    return text.strip()


_DECIMAL = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3})?"
_PLAIN_NUMBER = re.compile(rf"^(?P<value>{_DECIMAL})$")
_SLASH_FRACTION = re.compile(r"^(?P<num>[-+]?\d+)\s*/\s*(?P<den>\d+)$")
_LATEX_FRACTION = re.compile(
    r"^(?P<sign>[-+]?)\s*(?P<whole>\d+\s*)?\\frac\s*(?:\{\s*(?P<num>\d+)\s*\}|(?P<num1>\d))"
    r"\s*(?:\{\s*(?P<den>\d+)\s*\}|(?P<den1>\d))$"
)


@dataclass(frozen=True)
class _Number:
    value: Fraction
    percent: bool


def parse_number(answer: str) -> Fraction | None:
    r"""The exact value of a plain numeric answer (normalized first), else None.

    Integers, decimals, scientific notation, ``a/b``, ``\frac{a}{b}``, ``\frac12``, mixed
    numbers (``2\frac{1}{2}`` is 5/2) and percentages (``50%`` is 1/2).

    >>> parse_number(r"-\frac{3}{4}")
    Fraction(-3, 4)
    """
    number = _parse_number(normalize_answer(answer))
    if number is None:
        return None
    return number.value / 100 if number.percent else number.value


def _parse_number(text: str) -> _Number | None:
    if len(text) > MAX_FAST_NUMBER_CHARS:
        return None
    percent = text.endswith("%")
    if percent:
        text = text[:-1].rstrip()
    match = _PLAIN_NUMBER.match(text)
    if match:
        return _Number(Fraction(match.group("value")), percent)
    match = _SLASH_FRACTION.match(text)
    if match:
        den = int(match.group("den"))
        return None if den == 0 else _Number(Fraction(int(match.group("num")), den), percent)
    match = _LATEX_FRACTION.match(text)
    if match:
        num = int(match.group("num") or match.group("num1"))
        den = int(match.group("den") or match.group("den1"))
        if den == 0:
            return None
        value = Fraction(num, den) + int(match.group("whole") or 0)
        return _Number(-value if match.group("sign") == "-" else value, percent)
    return None


def compare_numbers(pred: str, gold: str, rel_tol: float) -> bool | None:
    """Whether two normalized answers are equal numbers (within ``rel_tol``, a percentage
    also matching its value over 100, a fraction rounding to a decimal gold as in
    :func:`rounds_to_gold`); None unless both are plain numbers.

    >>> compare_numbers("50%", "0.5", 1e-6)
    True
    """
    pred_number, gold_number = _parse_number(pred), _parse_number(gold)
    if pred_number is None or gold_number is None:
        return None
    if _numbers_equal(pred_number, gold_number, rel_tol):
        return True
    exact = not pred_number.percent and _PLAIN_NUMBER.match(pred) is None
    return exact and rounds_to_gold(pred_number.value, gold)


MIN_ROUNDED_GOLD_DIGITS = 3
"""A decimal gold with at least this many significant digits may be a rounded value."""
_ROUNDED_DECIMAL = re.compile(r"^[-+]?(?P<int>\d*)\.(?P<places>\d+)$")


def rounds_to_gold(value: Fraction, gold: str) -> bool:
    r"""Whether the exact ``value`` rounds to ``gold``, a decimal of at least
    :data:`MIN_ROUNDED_GOLD_DIGITS` significant digits, at the gold's decimal places (a
    percentage gold at its own places). A gold written ``85.71`` for ``\frac{600}{7}`` is a
    rounded value; ``0.25`` or ``0.5`` are read as exact.

    >>> rounds_to_gold(Fraction(600, 7), "85.71"), rounds_to_gold(Fraction(600, 7), "85.72")
    (True, False)
    """
    text = normalize_answer(gold)
    percent = text.endswith("%")
    text = text.removesuffix("%").rstrip()
    match = _ROUNDED_DECIMAL.match(text) if len(text) <= MAX_FAST_NUMBER_CHARS else None
    if match is None:
        return False
    digits = (match.group("int") + match.group("places")).lstrip("0")
    if len(digits) < MIN_ROUNDED_GOLD_DIGITS:
        return False
    scaled = value * 100 if percent else value
    return abs(scaled - Fraction(text)) <= Fraction(1, 2 * 10 ** len(match.group("places")))


def _close(a: Fraction, b: Fraction, rel_tol: float) -> bool:
    return abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b))


def _numbers_equal(pred: _Number, gold: _Number, rel_tol: float) -> bool:
    """Equal values; a percentage on either side also matches its value over 100."""
    candidates = [pred.value]
    if pred.percent != gold.percent:
        percent_side = pred if pred.percent else gold
        scaled = percent_side.value / 100
        candidates.append(scaled if pred.percent else pred.value * 100)
    return any(_close(c, gold.value, rel_tol) for c in candidates)
