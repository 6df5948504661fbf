r"""Grade a math completion against a gold answer: extraction, clean-up, equivalence.

Two tiers, cheapest first:

1. **In-process, exact.** When the completion states one explicit final answer (the same
   ``\boxed{}`` content throughout, or an ``<answer>`` tag) and both it and the gold are
   plain numbers (integers, decimals, fractions, mixed numbers, percentages, thousands
   separators), they are compared exactly in microseconds; equal cleaned-up strings are
   accepted; a multiple-choice gold is matched against the stated letter
   (:mod:`palaestra.verifiers.math_normalize`). These paths only decide where they agree
   with the second tier (``tests/verifiers/test_public_cases.py``).
2. **math-verify, in a worker.** Everything else goes to ``math-verify``'s extraction
   (boxed answers, several boxes joined into a set, "final answer is", LaTeX environments,
   relations, matrices, a bare LaTeX answer) and sympy equivalence, in a worker process with
   a hard timeout (:mod:`palaestra.verifiers.worker`), so a hostile expression costs at most
   ``timeout`` seconds and never hangs the caller (:mod:`palaestra.verifiers.math_symbolic`).

When the plain reading disagrees, the answer and the gold are also read in other forms
(:mod:`palaestra.verifiers.math_forms`): named components (``x=16, y=3`` for ``16, 3``),
definitions up to the argument's name (``f(t)=2t+1`` for ``f(x)=2x+1``), set-builder
notation and conditions joined by "or" as sets, vectors as tuples, ratios, ordinals, mixed
numbers, degrees and minutes, and an exact value against a decimal gold of three or more
significant digits that it rounds to (``\frac{600}{7}`` for ``85.71``; a decimal answer
against an exact gold stays wrong: ``0.333`` is not ``\frac{1}{3}``).

Guards against reward hacks hold on both tiers: an empty last ``\boxed{}`` is no answer;
more than ``max_boxed`` different boxed answers is a hedge and scores 0; digits separated by
spaces are only joined when they form thousands groups (``12 345``).

Order: a tuple ``(1, 2)``, a vector or matrix, and components named on both sides (``x=1,
y=2``, matched by name) are ordered; a set ``\{1, 2\}``, several boxes (``x=\boxed{2}`` or
``x=\boxed{3}``) and conditions joined by "or" are not. A bare comma list (``10, 4, -2``,
or the values of named components against it) is a set of solutions unless
``ordered_lists=True`` makes it a sequence (MATH's own checker treats ``10, 4, -2`` and
``4, 10, -2`` as different; math-verify and most "list all solutions" answers do not).

>>> verify(r"... so the result is \boxed{\frac{1}{2}}", "0.5")
1.0
>>> verify("The answer is 1,000 dollars.", "1000")
1.0
"""

from __future__ import annotations

import atexit
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from palaestra.core.shared import process_wide
from palaestra.verifiers.extract import answer_phrase, boxed_contents, last_tagged
from palaestra.verifiers.math_normalize import (
    MAX_FAST_NUMBER_CHARS,
    clean_latex,
    compare_numbers,
    normalize_answer,
    parse_number,
)
from palaestra.verifiers.math_symbolic import symbolic_grade
from palaestra.verifiers.worker import WorkerError, WorkerPool, WorkerTimeout

MAX_ANSWER_CHARS = 2000
"""An explicit final answer longer than this is graded 0 without parsing."""
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_REL_TOL = 1e-6
DEFAULT_MAX_BOXED = 5

Gold = str | int | float | Fraction | Sequence[str | int | float]

_INSTALL_HINT = (
    "symbolic math grading needs math-verify and sympy; install them with "
    "`pip install 'palaestra[math]'`"
)

__all__ = [
    "Gold",
    "MathGrade",
    "MathVerifier",
    "clean_latex",
    "default_verifier",
    "normalize_answer",
    "parse_number",
    "verify",
]

_CHOICES = frozenset("ABCDE")

# --- what the completion states ----------------------------------------------------------

_PAREN_CHOICE = re.compile(r"\(([A-E])\)")
_TRAILING_CHOICE = re.compile(r"(?:^|[\s:*])([A-E])[.)]?\**\s*$")
_LEADING_CHOICE = re.compile(r"^\s*\**\(?([A-E])(?:[.:)]|\**\s*$)")


@dataclass(frozen=True)
class _Stated:
    """The explicit final answer of a completion, as far as it can be told in-process."""

    answer: str | None  # the one boxed/tagged answer, if there is exactly one
    empty: bool = False  # the last box (or, without boxes, the last tag) is empty
    hedged: bool = False  # too many different boxed answers


_ANSWER_WORD = re.compile(r"(?i)answer")


def _stated_answer(completion: str, max_boxed: int) -> _Stated:
    """What the completion states as its final answer: its boxed or tagged answer, or the
    whole completion when it is one plain number (``5 cm``). A box followed by an answer
    phrase ("... the final answer is $5$") is not final: math-verify decides between them."""
    boxes = boxed_contents(completion)
    if boxes:
        if not boxes[-1].strip():
            return _Stated(None, empty=True)
        distinct = {" ".join(box.split()) for box in boxes}
        if len(distinct) > max_boxed:
            return _Stated(None, hedged=True)
        after = completion.rfind("\\boxed{")
        final = len(distinct) == 1 and not _ANSWER_WORD.search(completion, after)
        return _Stated(boxes[-1].strip() if final else None)
    tagged = last_tagged(completion)
    if tagged is None:
        bare = completion.strip()
        plain = len(bare) <= MAX_FAST_NUMBER_CHARS and parse_number(bare) is not None
        return _Stated(bare if plain else None)
    return _Stated(tagged.strip() or None, empty=not tagged.strip())


def _choice_letter(completion: str, stated: str | None) -> str | None:
    """The multiple-choice letter a completion states: its boxed/tagged answer, the letter
    an answer phrase names ("The answer is C."), the last ``(X)``, a letter standing alone
    at the very end, or a letter the completion opens with ("C. Because ...")."""
    if stated is not None:
        return _as_choice(stated)
    tail = completion[-MAX_ANSWER_CHARS:]
    phrase = answer_phrase(tail)
    letter = None if phrase is None else _as_choice(phrase)
    if letter is not None:
        return letter
    found = _PAREN_CHOICE.findall(tail)
    if found:
        return found[-1]
    match = _TRAILING_CHOICE.search(tail) or _LEADING_CHOICE.match(completion)
    return match.group(1) if match else None


def _as_choice(text: str) -> str | None:
    """``text`` as a choice letter (``C``, ``(c)``, ``\\text{C}``, ``C.``), else None."""
    letter = normalize_answer(text.strip().strip("*"))
    return letter if letter in _CHOICES else None


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

    ``method`` says what decided: ``"no_answer"``, ``"too_long"``, ``"hedged"`` (more than
    ``max_boxed`` different boxed answers), ``"string"``, ``"number"``, ``"choice"``,
    ``"symbolic"``, ``"timeout"`` or ``"error"``; later stages may add their own
    (:mod:`palaestra.verifiers.judge`).
    """

    score: float
    answer: str | None
    method: str


class MathVerifier:
    """A configured math grader; :func:`verify` uses a shared default instance.

    ``timeout`` bounds each symbolic comparison (the worker is killed past it);
    ``rel_tol`` is the relative tolerance between two numbers; ``max_boxed`` is how many
    different ``\\boxed{}`` answers a completion may give before it counts as hedging;
    ``ordered_lists`` compares bare comma lists (``1, 2, 3``) in order instead of as sets;
    ``max_workers`` caps concurrent symbolic comparisons.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        rel_tol: float = DEFAULT_REL_TOL,
        max_boxed: int = DEFAULT_MAX_BOXED,
        ordered_lists: bool = False,
        max_workers: int | None = None,
        memory_mb: int | None = 4096,
    ):
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if rel_tol < 0:
            raise ValueError(f"rel_tol must be >= 0, got {rel_tol}")
        if max_boxed < 1:
            raise ValueError(f"max_boxed must be >= 1, got {max_boxed}")
        self.timeout = timeout
        self.rel_tol = rel_tol
        self.max_boxed = max_boxed
        self.ordered_lists = ordered_lists
        self._pool = WorkerPool(
            max_workers,
            preload=("palaestra.verifiers.math_symbolic",),
            memory_mb=memory_mb,
            warmup=(symbolic_grade, (r"\boxed{\frac{1}{2}}", "x^2+1")),
        )

    def grade(self, completion: str, gold: Gold, *, timeout: float | None = None) -> MathGrade:
        """Grade ``completion``; with several gold answers, the best match counts.

        ``timeout`` overrides this verifier's bound on a symbolic comparison for this call.
        """
        golds = [gold] if isinstance(gold, str | int | float | Fraction) else list(gold)
        if not golds:
            raise ValueError("gold must be an answer or a non-empty sequence of answers")
        gold_texts = [_gold_text(one) for one in golds]
        stated = _stated_answer(completion, self.max_boxed)
        if stated.empty or not completion.strip():
            return MathGrade(0.0, None, "no_answer")
        if stated.hedged:
            return MathGrade(0.0, None, "hedged")
        if stated.answer is not None and len(stated.answer) > MAX_ANSWER_CHARS:
            return MathGrade(0.0, stated.answer, "too_long")
        failures = []
        for one in gold_texts:
            result = self._compare(completion, stated.answer, one, timeout)
            if result.score == 1.0:
                return result
            failures.append(result)
        return next((f for f in failures if f.method in ("timeout", "error")), failures[0])

    def _compare(
        self, completion: str, stated: str | None, gold: str, timeout: float | None
    ) -> MathGrade:
        fast = self._fast_compare(completion, stated, gold)
        if fast is not None:
            return fast
        _check_math_verify()
        limit = self.timeout if timeout is None else timeout
        # a stated final answer is all math-verify needs to read (and much shorter)
        text = completion if stated is None else f"\\boxed{{{stated}}}"
        args = (text, gold, self.ordered_lists)
        try:
            equal, extracted = self._pool.call(symbolic_grade, args, timeout=limit)
        except WorkerTimeout:
            return MathGrade(0.0, stated, "timeout")
        except WorkerError:
            return MathGrade(0.0, stated, "error")
        answer = stated if stated is not None else extracted
        return MathGrade(float(equal), answer or None, "symbolic" if answer else "no_answer")

    def _fast_compare(self, completion: str, stated: str | None, gold: str) -> MathGrade | None:
        """The in-process decision, or None when math-verify must decide. A choice gold is
        ``B``, ``(b)`` or ``\\text{(B)}``, not a bare ``e`` (a number)."""
        gold_norm = normalize_answer(gold)
        bare_letter = clean_latex(gold)
        if gold_norm in _CHOICES and not (len(bare_letter) == 1 and bare_letter.islower()):
            letter = _choice_letter(completion, stated)
            if letter is not None:
                return MathGrade(float(letter == gold_norm), letter, "choice")
        if stated is None:
            return None
        equal = compare_numbers(normalize_answer(stated), gold_norm, self.rel_tol)
        if equal is not None:
            return MathGrade(float(equal), stated, "number")
        if clean_latex(stated) == clean_latex(gold):
            return MathGrade(1.0, stated, "string")
        return None

    def compare(self, answer: str, gold: str, *, timeout: float | None = None) -> MathGrade:
        """Compare an already extracted answer with one gold answer (both raw strings)."""
        return self.grade(f"\\boxed{{{answer}}}", gold, timeout=timeout)

    def __call__(self, completion: str, gold: Gold) -> float:
        return self.grade(completion, gold).score

    def close(self) -> None:
        """Stop the worker processes (they also stop at interpreter exit)."""
        self._pool.close()


def _gold_text(gold: str | int | float | Fraction) -> str:
    """One gold answer as text: a gold with one ``\\boxed{}`` is its content; with several,
    math-verify reads them (nearby boxes together)."""
    if isinstance(gold, bool) or not isinstance(gold, str | int | float | Fraction):
        raise TypeError(f"gold answers must be str or numbers, got {type(gold).__name__}")
    if not isinstance(gold, str):
        return str(gold)
    boxes = boxed_contents(gold)
    return boxes[0] if len(boxes) == 1 and boxes[0].strip() else gold


@process_wide
def default_verifier() -> MathVerifier:
    """The shared :class:`MathVerifier` behind :func:`verify`: created on first use (threads
    resetting envs at once share one worker pool), closed at interpreter exit."""
    verifier = MathVerifier()
    atexit.register(verifier.close)
    return verifier


def verify(completion: str, gold: Gold, *, timeout: float | None = None) -> float:
    r"""1.0 when the answer in ``completion`` equals ``gold`` mathematically, else 0.0.

    ``gold`` may be LaTeX with or without ``$`` delimiters or ``\boxed{}``, a number, or a
    list of acceptable answers. ``timeout`` (seconds) overrides the default bound on a
    symbolic comparison. Tuples, vectors and named components are compared in order; sets
    and bare comma lists as sets (``MathVerifier(ordered_lists=True)`` for sequences).

    >>> verify(r"\boxed{x=3}", "3")
    1.0
    """
    return default_verifier().grade(completion, gold, timeout=timeout).score
