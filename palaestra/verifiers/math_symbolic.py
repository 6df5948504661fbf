r"""The math-verify tier of :mod:`palaestra.verifiers.math`, run in a worker process.

:func:`symbolic_grade` reads the answer out of a whole completion with math-verify's
extraction configuration (boxed answers, nearby boxes joined into a set, "final answer is",
LaTeX environments, plain expressions) and compares it with the gold under sympy (an
inequality equals its interval), adding the guards math-verify lacks: digits separated by spaces are joined only as thousands
groups, a decimal comma is read only against a plain number, a parse that kept one number of
a comma list is not compared, and bare comma lists can be compared in order. Everything here
may be slow on hostile input; the caller bounds it with the worker's timeout.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction
from functools import lru_cache

from palaestra.verifiers.extract import last_boxed
from palaestra.verifiers.math_forms import MAX_REWRITTEN_CHARS, other_readings
from palaestra.verifiers.math_normalize import clean_latex, rounds_to_gold

MAX_BARE_ANSWER_CHARS = 2000
"""A completion longer than this is never read as one bare LaTeX answer."""
MAX_COMPLETION_CHARS = 20_000
"""Only the last this many characters of a completion reach math-verify's extraction."""

_LATEX_MARKERS = re.compile(r"\\boxed|(?<!\\)\$|\\\(|\\\[|(?i:answer)")
_PROSE = re.compile(r"(?<!\\)\b[A-Za-z]{2,}\s+[A-Za-z]{2,}\b")
_COMMANDS_AND_TEXT = re.compile(r"\\[A-Za-z]+(?:\s*\{[^{}]*\})?")
_SPACED_DIGITS = re.compile(r"\d+(?:[ \t]+\d+)+")
_THOUSANDS_GROUPS = re.compile(r"\d{1,3}(?: \d{3})+")
_TOP_LEVEL_COMMA = re.compile(r",(?![^()\[\]{}]*[)\]}])")


def _is_bare_answer(completion: str) -> bool:
    """A completion with no delimiters, box or answer phrase that reads as maths, not prose
    (``f(x)=2x``, ``(9, 3), (6, 3)``): it is graded as one LaTeX answer."""
    if len(completion) > MAX_BARE_ANSWER_CHARS or _LATEX_MARKERS.search(completion):
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
        if not _THOUSANDS_GROUPS.fullmatch(" ".join(match.group().split())):
            return None
        parts += [extracted[last : match.start()], "".join(match.group().split())]
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
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # the worker enforces the timeout
    pred_parsed, extracted = _reading(completion)
    if _equal(pred_parsed, extracted, _parse_gold(gold), ordered_lists):
        return True, extracted
    answer = _answer_text(completion, extracted)
    return answer is not None and _equal_in_other_forms(answer, gold, ordered_lists), extracted


def _answer_text(completion: str, extracted: str | None) -> str | None:
    """The answer as written: the box or bare answer math-verify read, whose extraction
    may have kept only a part (``7`` of ``7 \\text{ apples and } 4 \\text{ pears}``)."""
    if extracted is None:
        return None
    box = last_boxed(completion)
    if box is not None and (extracted in box or completion == f"\\boxed{{{box}}}"):
        return box
    text = completion[-MAX_COMPLETION_CHARS:]
    return text if _is_bare_answer(text) and extracted in text else extracted


def _equal_in_other_forms(answer: str, gold: str, ordered_lists: bool) -> bool:
    """Whether ``answer`` equals ``gold`` once either is read in another form: the rewrites
    of :mod:`palaestra.verifiers.math_forms`, conditions as sets, a rounded decimal gold."""
    answer, gold = clean_latex(answer), clean_latex(gold)
    if not answer or not gold or max(len(answer), len(gold)) > MAX_REWRITTEN_CHARS:
        return False
    for index, (ours, theirs) in enumerate([(answer, gold), *other_readings(answer, gold)]):
        if index == 0 and not (_CONDITION.search(answer + gold) or "." in gold):
            continue  # as written, only a condition or a rounded gold can still match
        pred_parsed, gold_parsed = _parse(_as_latex(ours)), _parse_gold(theirs)
        if index and _equal(pred_parsed, ours, gold_parsed, ordered_lists):
            return True
        if _equal_as_sets(ours, pred_parsed, theirs, gold_parsed):
            return True
        if _rounds_to(pred_parsed, ours, theirs):
            return True
    return False


_CONDITION = re.compile(r"[<>|]|\\(?:[lg]eq?|neq?|[lg]eqslant|mid)\b|\bor\b")
_SET_BUILDER = re.compile(
    r"^(?:\\[Bb]igg?)?\\\{\s*(?P<var>[A-Za-z])\s*(?:\\mid|\||:|\\colon)"
    r"\s*(?P<condition>[^{}]*?(?:\{[^{}]*\}[^{}]*?)*?)\s*(?:\\[Bb]igg?)?\\\}"
    r"(?:\s*(?:-|\\setminus|\\backslash)\s*(?P<minus>\\\{[^{}]*\\\}))?$"
)


def _as_set(text: str, parsed: list):
    r"""The set an answer describes: a set-builder ``\{x \mid -1 < x < 1\}`` (less a finite
    set), a condition in one variable, or conditions joined by "or"; None otherwise."""
    builder = _SET_BUILDER.match(text)
    if builder:
        text = builder.group("condition")
        condition = _condition_set(text, _parse(f"${text}$"))
        if condition is None or not builder.group("minus"):
            return condition
        minus = _parse(f"${builder.group('minus')}$")
        return condition - minus[0] if minus and minus[0].is_FiniteSet else None
    return _condition_set(text, parsed)


_OR = re.compile(r"\bor\b|\\(?:lor|vee)\b")
_AND = re.compile(r"\band\b|\\(?:land|wedge)\b")


def _condition_set(text: str, parsed: list):
    """The solution set of a parsed condition in one variable, or None. math-verify parses
    conditions joined by "or" or "and" alike, as a set of conditions: only "or" (and no
    "and") makes it their union."""
    from sympy import And, FiniteSet, Or, Union
    from sympy.core.relational import Relational

    if not parsed:
        return None
    conditions = parsed[0].args if isinstance(parsed[0], FiniteSet) else (parsed[0],)
    if len(conditions) > 1 and not (_OR.search(text) and not _AND.search(text)):
        return None
    if not conditions or not all(isinstance(c, Relational | And | Or) for c in conditions):
        return None
    variables = set().union(*(c.free_symbols for c in conditions))
    if len(variables) != 1:
        return None
    return Union(*(c.as_set() for c in conditions))


def _equal_as_sets(answer: str, pred_parsed: list, gold: str, gold_parsed: list) -> bool:
    """Whether a condition or set-builder on one side describes the set on the other."""
    from math_verify import verify as mv_verify

    pred_set, gold_set = _as_set(answer, pred_parsed), _as_set(gold, gold_parsed)
    if pred_set is None and gold_set is None:
        return False
    pred_side = pred_parsed if pred_set is None else [pred_set]
    gold_side = gold_parsed if gold_set is None else [gold_set]
    if not pred_side or not gold_side:
        return False
    return bool(mv_verify(gold_side, pred_side, timeout_seconds=None))


def _rounds_to(pred_parsed: list, answer: str, gold: str) -> bool:
    """Whether an exact closed-form answer (not a decimal) rounds to a decimal gold."""
    from sympy import Expr, Rational

    value = pred_parsed[0] if pred_parsed else None
    if not isinstance(value, Expr) or value.free_symbols or _DOT_NUMBER.fullmatch(answer):
        return False
    numeric = value.evalf(30)
    if not numeric.is_real or not numeric.is_finite:
        return False
    return rounds_to_gold(Fraction(str(Rational(numeric))), gold)


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
    return bool(
        mv_verify(gold_parsed, pred_parsed, timeout_seconds=None, allow_set_relation_comp=True)
    )
