r"""Grade a math completion against a gold answer: extraction, normalization, equivalence.

Three tiers, cheapest first:

1. the answer is pulled out of the completion (``\boxed{}``, ``<answer>``, "the answer is",
   last number; see :func:`palaestra.verifiers.extract.extract_answer`) and normalized
   (delimiters, ``\text{}``, units, degree signs, ``x =`` prefixes, thousands commas);
2. equal normalized strings, or two plain numbers (integers, decimals, fractions, mixed
   numbers, percentages) are decided in-process, exactly, in microseconds;
3. anything else (expressions, intervals, sets, radicals) goes to ``math-verify`` and sympy
   in a worker process with a hard timeout (:mod:`palaestra.verifiers.worker`), so a hostile
   expression costs at most ``timeout`` seconds and never hangs the caller.

>>> verify(r"... so the result is \boxed{\frac{1}{2}}", "0.5")
1.0
>>> verify("The answer is 1,000 dollars.", "1000")
1.0
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from palaestra.verifiers.extract import EXTRACTION_ORDER, extract_answer
from palaestra.verifiers.worker import WorkerError, WorkerPool, WorkerTimeout

MAX_ANSWER_CHARS = 2000
"""Extracted answers longer than this are graded 0 without parsing."""
MAX_FAST_NUMBER_CHARS = 200
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_REL_TOL = 1e-6

Gold = str | int | float | Fraction | Sequence[str | int | float]

_INSTALL_HINT = (
    "symbolic math grading needs math-verify and sympy; install them with "
    "`pip install 'palaestra[math]'`"
)

# --- normalization -----------------------------------------------------------------------

_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_SPACING = re.compile(r"\\[!,;: ]|\\(?:displaystyle|left|right|bigl|bigr|Bigl|Bigr)\b|~")
_TEXT_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|\\in)\s*(?=\S)")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?=$|\s|%)")
_NUMBER_WITH_UNIT = re.compile(
    r"^(?P<number>[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?|\\frac\{\d+\}\{\d+\})%?)"
    r"(?:\s*(?P<words>[A-Za-z]{2,}(?:[\s.]+[A-Za-z]{2,})*)\.?|\s+[mgsLhKNJWVA])(?:\^\{?\d\}?)?$"
)
_NOT_UNITS = frozenset({"pi", "sqrt", "inf", "infty", "and", "or", "to", "cdot", "times"})
_CHOICE = re.compile(r"^\(?\s*([A-Ea-e])\s*\)?$")
_WHITESPACE = re.compile(r"\s+")


def normalize_answer(answer: str) -> str:
    r"""A canonical string form of an answer (no evaluation, linear time).

    >>> normalize_answer(r"$x = \dfrac{3}{4}\text{ cm}$")
    '\\frac{3}{4}'
    """
    text = answer.strip().replace("\\$", "").replace("{,}", ",")
    text = _DELIMITERS.sub("", text)
    text = _SPACING.sub(" ", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\%", "%")
    for _ in range(3):  # unwrap nested \text{\textbf{...}} a few levels deep
        text = _TEXT_WRAPPER.sub(r"\1", text)
    text = _DEGREES.sub("", text)
    text = _WHITESPACE.sub(" ", text).strip().rstrip(".").strip()
    if text.count("=") == 1 or "\\in" in text:
        text = _ASSIGNMENT.sub("", text)
    if _THOUSANDS.match(text):
        head = _THOUSANDS.match(text)
        text = head.group().replace(",", "") + text[head.end() :]
    unit = _NUMBER_WITH_UNIT.match(text)
    if unit and not _NOT_UNITS.intersection((unit.group("words") or "").lower().split()):
        text = unit.group("number")
    choice = _CHOICE.match(text)
    if choice:
        text = choice.group(1).upper()
    return text.strip()


# --- exact numbers -----------------------------------------------------------------------

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


# --- symbolic tier (runs in a worker) ----------------------------------------------------


@lru_cache(maxsize=4096)
def _parse_symbolic(text: str) -> list:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    latex = text.replace("\\%", "%").replace("%", "\\%")  # a bare % starts a LaTeX comment
    return parse(f"${latex}$", extraction_config=configs, parsing_timeout=None)


def symbolic_equal(pred: str, gold: str) -> bool:
    """Whether two normalized answers are equal under math-verify (call in a worker)."""
    from math_verify import verify as mv_verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # the worker enforces the timeout
    gold_parsed = _parse_symbolic(gold)
    pred_parsed = _parse_symbolic(pred)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(mv_verify(gold_parsed, pred_parsed, timeout_seconds=None))


def _check_math_verify() -> None:
    try:
        import math_verify  # noqa: F401
        import sympy  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


# --- public API --------------------------------------------------------------------------


@dataclass(frozen=True)
class MathGrade:
    """The outcome of one grading call, for logging.

    ``method`` says which tier decided: ``"no_answer"``, ``"too_long"``, ``"string"``,
    ``"number"``, ``"symbolic"``, ``"timeout"`` or ``"error"``.
    """

    score: float
    answer: str | None
    method: str


class MathVerifier:
    """A configured math grader; :func:`verify` uses a shared default instance.

    ``timeout`` bounds each symbolic comparison (the worker is killed past it);
    ``rel_tol`` is the relative tolerance between two numbers; ``extraction`` is the order of
    extraction strategies; ``max_workers`` caps concurrent symbolic comparisons.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        rel_tol: float = DEFAULT_REL_TOL,
        extraction: tuple[str, ...] = EXTRACTION_ORDER,
        max_workers: int | None = None,
        memory_mb: int | None = 4096,
    ):
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if rel_tol < 0:
            raise ValueError(f"rel_tol must be >= 0, got {rel_tol}")
        extract_answer("", extraction)  # validates the strategy names
        self.timeout = timeout
        self.rel_tol = rel_tol
        self.extraction = extraction
        self._pool = WorkerPool(
            max_workers,
            preload=("palaestra.verifiers.math",),
            memory_mb=memory_mb,
            warmup=(symbolic_equal, (r"\frac{1}{2}", "x^2+1")),
        )

    def grade(self, completion: str, gold: Gold, *, timeout: float | None = None) -> MathGrade:
        """Grade ``completion``; with several gold answers, the best match counts.

        ``timeout`` overrides this verifier's bound on a symbolic comparison for this call.
        """
        answer = extract_answer(completion, self.extraction)
        if answer is None:
            return MathGrade(0.0, None, "no_answer")
        if len(answer) > MAX_ANSWER_CHARS:
            return MathGrade(0.0, answer, "too_long")
        golds = [gold] if isinstance(gold, str | int | float | Fraction) else list(gold)
        if not golds:
            raise ValueError("gold must be an answer or a non-empty sequence of answers")
        failures = []
        for one in golds:
            result = self.compare(answer, _gold_text(one), timeout=timeout)
            if result.score == 1.0:
                return result
            failures.append(result)
        return next((f for f in failures if f.method in ("timeout", "error")), failures[0])

    def compare(self, answer: str, gold: str, *, timeout: float | None = None) -> MathGrade:
        """Compare an extracted answer with one gold answer (both raw strings)."""
        pred_text, gold_text = normalize_answer(answer), normalize_answer(gold)
        if pred_text and _WHITESPACE.sub("", pred_text) == _WHITESPACE.sub("", gold_text):
            return MathGrade(1.0, answer, "string")
        pred_num, gold_num = _parse_number(pred_text), _parse_number(gold_text)
        if pred_num is not None and gold_num is not None:
            equal = _numbers_equal(pred_num, gold_num, self.rel_tol)
            return MathGrade(float(equal), answer, "number")
        if not pred_text or not gold_text:
            return MathGrade(0.0, answer, "string")
        _check_math_verify()
        limit = self.timeout if timeout is None else timeout
        try:
            equal = self._pool.call(symbolic_equal, (pred_text, gold_text), timeout=limit)
        except WorkerTimeout:
            return MathGrade(0.0, answer, "timeout")
        except WorkerError:
            return MathGrade(0.0, answer, "error")
        return MathGrade(float(equal), answer, "symbolic")

    def __call__(self, completion: str, gold: Gold) -> float:
        return self.grade(completion, gold).score

    def close(self) -> None:
        """Stop the worker processes (they also stop at interpreter exit)."""
        self._pool.close()


def _gold_text(gold: str | int | float | Fraction) -> str:
    if isinstance(gold, bool) or not isinstance(gold, str | int | float | Fraction):
        raise TypeError(f"gold answers must be str or numbers, got {type(gold).__name__}")
    if isinstance(gold, str):
        return extract_answer(gold, ("boxed",)) or gold
    return str(gold)


_default: MathVerifier | None = None


def default_verifier() -> MathVerifier:
    """The shared :class:`MathVerifier` behind :func:`verify` (created on first use)."""
    global _default
    if _default is None:
        _default = MathVerifier()
    return _default


def verify(completion: str, gold: Gold, *, timeout: float | None = None) -> float:
    r"""1.0 when the answer in ``completion`` equals ``gold`` mathematically, else 0.0.

    ``gold`` may be LaTeX with or without ``$`` delimiters or ``\boxed{}``, a number, or a
    list of acceptable answers. ``timeout`` (seconds) overrides the default bound on a
    symbolic comparison.

    >>> verify(r"\boxed{x=3}", "3")
    1.0
    """
    return default_verifier().grade(completion, gold, timeout=timeout).score
