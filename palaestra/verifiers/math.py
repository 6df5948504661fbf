r"""Grade a math completion against a gold answer: extraction, clean-up, equivalence.

Two tiers, cheapest first:

1. **In-process, exact.** When the completion states one explicit final answer (the same
   ``\boxed{}`` content throughout, or an ``<answer>`` tag) and both it and the gold are
   plain numbers (integers, decimals, fractions, mixed numbers, percentages, thousands
   separators), they are compared exactly in microseconds; equal cleaned-up strings are
   accepted; a multiple-choice gold is matched against the stated letter. These paths only
   decide where they agree with the second tier (``tests/verifiers/test_public_cases.py``).
2. **math-verify, in a worker.** Everything else goes to ``math-verify``'s extraction
   (boxed answers, several boxes joined into a set, "final answer is", LaTeX environments,
   relations, matrices, a bare LaTeX answer) and sympy equivalence, in a worker process with
   a hard timeout (:mod:`palaestra.verifiers.worker`), so a hostile expression costs at most
   ``timeout`` seconds and never hangs the caller.

Guards against reward hacks hold on both tiers: an empty last ``\boxed{}`` is no answer;
more than ``max_boxed`` different boxed answers is a hedge and scores 0; digits separated by
spaces are only joined when they form thousands groups (``12 345``); ordered tuples stay
ordered. Bare comma lists are compared as sets unless ``ordered_lists=True`` (a labelling
policy: MATH's own checker treats ``10, 4, -2`` and ``4, 10, -2`` as different).

>>> verify(r"... so the result is \boxed{\frac{1}{2}}", "0.5")
1.0
>>> verify("The answer is 1,000 dollars.", "1000")
1.0
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from palaestra.verifiers.extract import boxed_contents, last_tagged
from palaestra.verifiers.worker import WorkerError, WorkerPool, WorkerTimeout

MAX_ANSWER_CHARS = 2000
"""An explicit final answer longer than this is graded 0 without parsing."""
MAX_COMPLETION_CHARS = 20_000
"""Only the last this many characters of a completion reach math-verify's extraction."""
MAX_FAST_NUMBER_CHARS = 200
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_REL_TOL = 1e-6
DEFAULT_MAX_BOXED = 5

Gold = str | int | float | Fraction | Sequence[str | int | float]

_INSTALL_HINT = (
    "symbolic math grading needs math-verify and sympy; install them with "
    "`pip install 'palaestra[math]'`"
)

# --- clean-up ----------------------------------------------------------------------------

_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_MATH_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|,\\!\s*)(?=\d{3}(?!\d))")
_SPACE_THOUSANDS = re.compile(r"(?<=\d)\\[,;: ](?=\d{3}(?!\d))")
_SPACING = re.compile(r"\\[!,;: ]|~")
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


# --- what the completion states ----------------------------------------------------------

_PAREN_CHOICE = re.compile(r"\(([A-E])\)")
_TRAILING_CHOICE = re.compile(r"(?:^|[\s:*])([A-E])[.)]?\**\s*$")


@dataclass(frozen=True)
class _Stated:
    """The explicit final answer of a completion, as far as it can be told in-process."""

    answer: str | None  # the one boxed/tagged answer, if there is exactly one
    empty: bool = False  # the last box (or, without boxes, the last tag) is empty
    hedged: bool = False  # too many different boxed answers


_ANSWER_WORD = re.compile(r"(?i)answer")


def _stated_answer(completion: str, max_boxed: int) -> _Stated:
    """What the completion states as its final answer. A box followed by an answer phrase
    ("... the final answer is $5$") is not final: math-verify decides between them."""
    boxes = boxed_contents(completion)
    if boxes:
        if not boxes[-1].strip():
            return _Stated(None, empty=True)
        distinct = {_WHITESPACE.sub(" ", box.strip()) for box in boxes}
        if len(distinct) > max_boxed:
            return _Stated(None, hedged=True)
        after = completion.rfind("\\boxed{")
        final = len(distinct) == 1 and not _ANSWER_WORD.search(completion, after)
        return _Stated(boxes[-1].strip() if final else None)
    tagged = last_tagged(completion)
    if tagged is None:
        return _Stated(None)
    return _Stated(tagged.strip() or None, empty=not tagged.strip())


def _choice_letter(completion: str, stated: str | None) -> str | None:
    """The multiple-choice letter a completion ends on: its boxed/tagged answer, the last
    ``(X)``, or a letter standing alone at the very end."""
    if stated is not None:
        return normalize_answer(stated) if _CHOICE.match(normalize_answer(stated)) else None
    tail = completion[-MAX_ANSWER_CHARS:]
    found = _PAREN_CHOICE.findall(tail)
    if found:
        return found[-1]
    match = _TRAILING_CHOICE.search(tail)
    return match.group(1) if match else None


# --- symbolic tier (runs in a worker) ----------------------------------------------------

_LATEX_MARKERS = re.compile(r"\\boxed|(?<!\\)\$|\\\(|\\\[|(?i:answer)")
_PROSE = re.compile(r"(?<!\\)\b[A-Za-z]{2,}\s+[A-Za-z]{2,}\b")
_COMMANDS_AND_TEXT = re.compile(r"\\[A-Za-z]+(?:\s*\{[^{}]*\})?")
_SPACED_DIGITS = re.compile(r"\d+(?:[ \t]+\d+)+")
_THOUSANDS_GROUPS = re.compile(r"\d{1,3}(?: \d{3})+")
_TOP_LEVEL_COMMA = re.compile(r",(?![^()\[\]{}]*[)\]}])")


def _is_bare_answer(completion: str) -> bool:
    """A completion with no delimiters, box or answer phrase that reads as maths, not prose
    (``f(x)=2x``, ``(9, 3), (6, 3)``): it is graded as one LaTeX answer."""
    if len(completion) > MAX_ANSWER_CHARS or _LATEX_MARKERS.search(completion):
        return False
    return not _PROSE.search(_COMMANDS_AND_TEXT.sub(" ", completion))


@lru_cache(maxsize=1)
def _extraction_configs() -> tuple:
    """math-verify's LaTeX extraction and plain expressions (its default priorities)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return (LatexExtractionConfig(), ExprExtractionConfig())


def _parse(text: str) -> list:
    from math_verify import parse

    return parse(text, extraction_config=_extraction_configs(), parsing_timeout=None)


def _as_latex(answer: str) -> str:
    """``answer`` in math delimiters unless it already has some."""
    return answer if _LATEX_MARKERS.search(answer) else f"${answer}$"


def _joined_digits(extracted: str) -> str | None:
    """``extracted`` with thousands groups (``12 345``) joined; None when digits are
    separated by spaces in any other way (``1 2`` is neither 12 nor 3)."""
    if not _SPACED_DIGITS.search(extracted):
        return extracted
    parts = []
    last = 0
    for match in _SPACED_DIGITS.finditer(extracted):
        if not _THOUSANDS_GROUPS.fullmatch(_WHITESPACE.sub(" ", match.group())):
            return None
        parts += [extracted[last : match.start()], _WHITESPACE.sub("", match.group())]
        last = match.end()
    return "".join([*parts, extracted[last:]])


def _reading(completion: str) -> tuple[list, str | None]:
    """math-verify's reading of a completion: (parsed values, extracted text). A bare answer
    is read as one LaTeX expression (``x \\geq 5`` is not 5); only when that fails to parse
    does math-verify's own extraction look for an answer inside it."""
    text = completion[-MAX_COMPLETION_CHARS:]
    if _is_bare_answer(text):
        parsed, extracted = _extract(f"${text}$")
        if parsed and not _lost_list(parsed, text):
            return parsed, extracted
    return _extract(text)


def _extract(text: str) -> tuple[list, str | None]:
    """math-verify's extraction from ``text``, with digits joined only as thousands groups."""
    parsed = _parse(text)
    extracted = next((p for p in parsed if isinstance(p, str)), None)
    if extracted is None or not parsed:
        return parsed, extracted
    joined = _joined_digits(extracted)
    if joined is None:
        return [], extracted
    if joined != extracted:
        parsed = _parse(f"${joined}$")
    return parsed, extracted


_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+")
_COMMA_THOUSANDS = re.compile(r"[-+]?[1-9]\d{0,2}(?:,\d{3})+")
_DOT_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def _decimal_comma(text: str | None, other: str | None) -> str | None:
    """``text`` read with a decimal comma (``2,74`` is 2.74) when it is one number with a
    comma that cannot be a thousands separator and ``other`` is a plain number; else None.
    The other side decides, so ``2,74`` stays the list 2, 74 against a list gold."""
    if text is None or other is None or not _DOT_NUMBER.fullmatch(other.strip()):
        return None
    text = text.strip()
    if _DECIMAL_COMMA.fullmatch(text) and not _COMMA_THOUSANDS.fullmatch(text):
        return text.replace(",", ".")
    return None


def _lost_list(parsed: list, text: str | None) -> bool:
    """Whether a parse kept one number of a comma-separated text (``40 \\text{red}, 60``
    read as 40): such a parse cannot be compared."""
    if not parsed or text is None or not getattr(parsed[0], "is_Number", False):
        return False
    return len(_TOP_LEVEL_COMMA.split(_THOUSANDS_COMMA.sub("", clean_latex(text)))) > 1


def _ordered_equal(pred_text: str, gold_text: str) -> bool:
    """Element-wise comparison of two bare comma lists, in order."""
    from math_verify import verify as mv_verify

    preds = _TOP_LEVEL_COMMA.split(pred_text)
    golds = _TOP_LEVEL_COMMA.split(gold_text)
    if len(preds) != len(golds):
        return False
    return all(
        mv_verify(_parse(f"${g}$"), _parse(f"${p}$"), timeout_seconds=None)
        for p, g in zip(preds, golds, strict=True)
    )


def _is_bare_list(parsed: list, text: str | None) -> bool:
    from sympy import FiniteSet

    return (
        bool(parsed)
        and isinstance(parsed[0], FiniteSet)
        and text is not None
        and not text.lstrip().startswith(("\\{", "{"))
    )


def symbolic_grade(
    completion: str, gold: str, ordered_lists: bool = False
) -> tuple[bool, str | None]:
    """Whether math-verify finds ``gold`` in ``completion`` (call in a worker): the verdict
    and the answer text it extracted."""
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # the worker enforces the timeout
    pred_parsed, extracted = _reading(completion)
    return _equal(pred_parsed, extracted, _parse_gold(gold), ordered_lists), extracted


@lru_cache(maxsize=1024)
def _parse_gold(gold: str) -> list:
    """The parsed gold (empty when it cannot be compared); cached, since one gold is graded
    against many completions."""
    parsed = _parse(_as_latex(gold))
    return [] if _is_bare_answer(gold) and _lost_list(parsed, gold) else parsed


def _equal(
    pred_parsed: list, extracted: str | None, gold_parsed: list, ordered_lists: bool
) -> bool:
    from math_verify import verify as mv_verify

    if not gold_parsed or not pred_parsed:
        return False
    gold_text = next((p for p in gold_parsed if isinstance(p, str)), None)
    pred_dot, gold_dot = _decimal_comma(extracted, gold_text), _decimal_comma(gold_text, extracted)
    if pred_dot is not None:
        pred_parsed, extracted = _parse(f"${pred_dot}$"), pred_dot
    if gold_dot is not None:
        gold_parsed, gold_text = _parse(f"${gold_dot}$"), gold_dot
    if _lost_list(pred_parsed, extracted) or _lost_list(gold_parsed, gold_text):
        return False
    if (
        ordered_lists
        and _is_bare_list(pred_parsed, extracted)
        and _is_bare_list(gold_parsed, gold_text)
    ):
        return _ordered_equal(extracted, gold_text)
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
            preload=("palaestra.verifiers.math",),
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
        args = (completion, gold, self.ordered_lists)
        try:
            equal, extracted = self._pool.call(symbolic_grade, args, timeout=limit)
        except WorkerTimeout:
            return MathGrade(0.0, stated, "timeout")
        except WorkerError:
            return MathGrade(0.0, stated, "error")
        answer = stated if stated is not None else extracted
        return MathGrade(float(equal), answer or None, "symbolic" if answer else "no_answer")

    def _fast_compare(self, completion: str, stated: str | None, gold: str) -> MathGrade | None:
        """The in-process decision, or None when math-verify must decide."""
        gold_norm = normalize_answer(gold)
        if _CHOICE.match(gold_norm) and len(gold_norm) == 1:
            letter = _choice_letter(completion, stated)
            if letter is not None:
                return MathGrade(float(letter == gold_norm), letter, "choice")
        if stated is None:
            return None
        pred_num, gold_num = _parse_number(normalize_answer(stated)), _parse_number(gold_norm)
        if pred_num is not None and gold_num is not None:
            return MathGrade(
                float(_numbers_equal(pred_num, gold_num, self.rel_tol)), stated, "number"
            )
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
    if isinstance(gold, bool) or not isinstance(gold, str | int | float | Fraction):
        raise TypeError(f"gold answers must be str or numbers, got {type(gold).__name__}")
    if not isinstance(gold, str):
        return str(gold)
    return gold


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
