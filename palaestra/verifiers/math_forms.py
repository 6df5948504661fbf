r"""Other ways of writing the same answer, as rewrites the math grader tries when the plain
reading of an answer and its gold disagree.

Each rewrite keeps the meaning and changes only the form, so a wrong value stays wrong:

- symbols typed in Unicode (``∞``, ``∪``, ``≤``, ``π``) as their LaTeX commands;
- a column or row vector (``\begin{pmatrix}1\\2\end{pmatrix}``) as the tuple ``(1, 2)``;
- a ratio of two numbers (``20:3``) as its value ``\frac{20}{3}``; an ordinal (``12^{th}``,
  ``15th``) as its number; a mixed number (``21\frac{13}{14}``) as its value; degrees and
  minutes (``60^\circ 42'``) as degrees;
- named components (``x=16, y=3``, ``Ann: 16, Bo: 3``, ``T(1)=2, T(2)=4``, ``7 \text{
  apples and } 4 \text{ pears}``) as their values in the order written; when both sides
  name the same components, each value is compared with the gold value of its name;
- a definition (``f(t)=2t+1``, ``m_{\max} = n^2-1``) as the expression it defines, its
  argument renamed to the gold's (``f(t)=2t+1`` equals ``f(x)=2x+1``, not ``2t+1``
  against ``f(x)=2x+1``);
- an angle in degrees (``30^\circ``) against one in radians (``\frac{\pi}{6}``);
- a general solution's integer parameter (``\frac{\pi}{6}+n\pi``) renamed to the gold's
  (``k``).

Set-builder notation and unions of conditions are turned into sets after parsing, in
:mod:`palaestra.verifiers.math_symbolic`. Every function here runs in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from palaestra.verifiers.math_normalize import parse_number

MAX_REWRITTEN_CHARS = 2000
"""Longer answers are only read as written."""

_UNICODE = {
    "∞": r"\infty ",
    "∪": r"\cup ",
    "∩": r"\cap ",
    "π": r"\pi ",
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "＞": ">",
    "＜": "<",
    "−": "-",
    "∈": r"\in ",
    "·": r"\cdot ",
    "×": r"\times ",
}
_UNICODE_CHARS = re.compile("|".join(map(re.escape, _UNICODE)))
_PLUS_INFINITY = re.compile(r"\+\s*\\infty")

_VECTOR = re.compile(r"^\\begin\{([pbv]?matrix)\}(?P<body>[^{}]*)\\end\{\1\}$")
_RATIO = re.compile(r"^(?P<a>\d+(?:\.\d+)?)\s*:\s*(?P<b>\d+(?:\.\d+)?)$")
_ORDINAL = re.compile(
    r"^(?P<n>\d+)\s*(?:\^\s*\{?\s*(?:\\(?:mathrm|text)\s*\{)?\s*(?:st|nd|rd|th)\s*\}?\s*\}?"
    r"|(?:st|nd|rd|th)\b)(?P<rest>(?:\s+[A-Za-z]+)?)$"
)
_MIXED_NUMBER = re.compile(r"^-?\d+\s*\\frac")
_DEGREES_MINUTES = re.compile(
    r"^(?P<deg>\d+)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree)\s*(?P<min>\d+(?:\.\d+)?)\s*"
    r"(?:'|\\prime|\^\s*\{?\s*\\prime\s*\}?)$"
)


def symbols_as_latex(text: str) -> str:
    r"""Unicode maths symbols as LaTeX commands; ``+\infty`` as ``\infty``.

    >>> symbols_as_latex("(-∞, -3) ∪ (3, +∞)")
    '(-\\infty , -3) \\cup  (3, \\infty )'
    """
    text = _UNICODE_CHARS.sub(lambda m: _UNICODE[m.group()], text)
    return _PLUS_INFINITY.sub(r"\\infty", text)


def vector_as_tuple(text: str) -> str | None:
    r"""A one-column or one-row matrix as a tuple, else None.

    >>> vector_as_tuple(r"\begin{pmatrix} -7 \\ 16 \end{pmatrix}")
    '(-7, 16)'
    """
    match = _VECTOR.match(text.strip())
    if match is None:
        return None
    rows = [row.split("&") for row in match.group("body").split("\\\\") if row.strip()]
    if len(rows) == 1:
        entries = rows[0]
    elif all(len(row) == 1 for row in rows):
        entries = [row[0] for row in rows]
    else:
        return None
    return "(" + ", ".join(entry.strip() for entry in entries) + ")"


def number_form(text: str) -> str | None:
    r"""A ratio, an ordinal, a mixed number or degrees and minutes as a plain number, else
    None.

    >>> number_form("20:3"), number_form(r"12^{th}"), number_form(r"2\frac{1}{2}")
    ('\\frac{20}{3}', '12', '\\frac{5}{2}')
    """
    text = text.strip()
    ratio = _RATIO.match(text)
    if ratio:
        return f"\\frac{{{ratio.group('a')}}}{{{ratio.group('b')}}}"
    ordinal = _ORDINAL.match(text)
    if ordinal:
        return ordinal.group("n")
    if _MIXED_NUMBER.match(text):
        value = parse_number(text)
        if value is not None:
            return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    angle = _DEGREES_MINUTES.match(text)
    if angle:
        minutes = float(angle.group("min"))
        total = int(angle.group("deg")) * 60 + minutes
        return f"\\frac{{{total:g}}}{{60}}"
    return None


def _with_forms(text: str) -> str:
    """``text`` with every whole-answer form above rewritten."""
    text = symbols_as_latex(text).strip()
    return vector_as_tuple(text) or number_form(text) or text


# --- named components --------------------------------------------------------------------

_TOP_LEVEL_SPLIT = re.compile(r"(?:,|;|\\text\{\s*and\s*\}|\band\b)(?![^()\[\]{}]*[)\]}])")
_LABEL = re.compile(
    r"^\s*(?P<label>\\text\{[^{}]*\}|[A-Za-z][A-Za-z ]*(?:_\{?\w+\}?)?(?:\(\s*-?\d+\s*\))?)"
    r"\s*(?:=|:)\s*(?P<value>.+?)\s*$"
)
_VALUE_IN_WORDS = re.compile(
    r"^\s*(?P<value>-?\d+(?:\.\d+)?)\s*(?:\\text\{\s*[A-Za-z][A-Za-z ]*\}|[A-Za-z]{2,}(?: [A-Za-z]+)*)\s*$"
)


def named_components(text: str) -> list[tuple[str, str]] | None:
    r"""(name, value) of each part of a list whose every part is named (``x=16``, ``Ann:
    16``, ``T(1)=2``) or is a number in words (``7 \text{ apples}``, name ``""``); else None.

    >>> named_components(r"x=16, y=3")
    [('x', '16'), ('y', '3')]
    """
    parts = [part for part in _TOP_LEVEL_SPLIT.split(text) if part.strip()]
    if len(parts) < 2:
        return None
    named = []
    for part in parts:
        label, words = _LABEL.match(part), _VALUE_IN_WORDS.match(part)
        if label and "=" not in label.group("value"):
            named.append((" ".join(label.group("label").split()), label.group("value")))
        elif words:
            named.append(("", words.group("value")))
        else:
            return None
    return named


def _same_names(ours: list[tuple[str, str]], theirs: list[tuple[str, str]]) -> bool:
    """Whether both lists name the same components, each once."""
    names = [name for name, _ in ours]
    return (
        all(names)
        and len(set(names)) == len(names) == len(theirs)
        and set(names) == {name for name, _ in theirs}
    )


def _row(values: list[str]) -> str:
    """Values as a one-row matrix: compared in order, element by element."""
    return "\\begin{pmatrix}" + " & ".join(values) + "\\end{pmatrix}"


def _component_readings(answer: str, gold: str) -> Iterator[tuple[str, str]]:
    """The values of named components, matched by name when both sides name the same
    ones, else in the order written (a tuple when the gold is a tuple)."""
    ours, theirs = named_components(answer), named_components(gold)
    if ours is None and theirs is None:
        return
    if ours and theirs and _same_names(ours, theirs):
        by_name = dict(ours)
        yield _row([by_name[name] for name, _ in theirs]), _row([v for _, v in theirs])
        return
    left = answer if ours is None else ", ".join(value for _, value in ours)
    right = gold if theirs is None else ", ".join(value for _, value in theirs)
    if theirs is None and ours is not None and gold.strip().startswith("("):
        left = f"({left})"
    if ours is None and theirs is not None and answer.strip().startswith("("):
        right = f"({right})"
    yield left, right


# --- definitions and parameters ----------------------------------------------------------

_DEFINITION = re.compile(
    r"^\s*(?P<name>[A-Za-z](?:_\{[^{}]*\}|_\w)?)\s*(?:\(\s*(?P<arg>[A-Za-z])\s*\))?\s*="
    r"(?P<body>[^=]+)$"
)
_PARAMETERS = "kmnt"


def _symbol(letter: str) -> re.Pattern[str]:
    """``letter`` as a variable: not part of a command, a word or a subscript name."""
    return re.compile(rf"(?<![\\A-Za-z]){letter}(?![A-Za-z])")


def definition(text: str) -> tuple[str | None, str] | None:
    r"""(argument, body) of ``f(t) = body`` or of ``m = body`` whose name is not in the body.

    >>> definition("f(t)=2t+1"), definition(r"m_{\max} = n^2-1"), definition("x = 2x")
    (('t', '2t+1'), (None, 'n^2-1'), None)
    """
    match = _DEFINITION.match(text)
    if match is None:
        return None
    body, arg = match.group("body").strip(), match.group("arg")
    if arg is None and _symbol(re.escape(match.group("name"))).search(body):
        return None
    return arg, body


def _definition_readings(answer: str, gold: str) -> Iterator[tuple[str, str]]:
    """The bodies of definitions, the answer's argument renamed to the gold's."""
    ours, theirs = definition(answer), definition(gold)
    if ours is None and theirs is None:
        return
    if ours is not None and theirs is None and "=" in gold:
        return
    if theirs is not None and ours is None and "=" in answer:
        return
    left = answer if ours is None else ours[1]
    right = gold if theirs is None else theirs[1]
    if ours and theirs and ours[0] and theirs[0] and ours[0] != theirs[0]:
        if _symbol(theirs[0]).search(left):
            return  # renaming would merge two variables
        left = _symbol(ours[0]).sub(theirs[0], left)
    yield left, right


def _parameter_readings(answer: str, gold: str) -> Iterator[tuple[str, str]]:
    r"""The answer with its integer parameter (``n`` in ``\frac{\pi}{6}+n\pi``) renamed to
    the gold's, when each side uses exactly one and they differ."""
    if "\\pi" not in gold:
        return
    ours = [p for p in _PARAMETERS if _symbol(p).search(answer)]
    theirs = [p for p in _PARAMETERS if _symbol(p).search(gold)]
    if len(ours) == 1 and len(theirs) == 1 and ours != theirs:
        yield _symbol(ours[0]).sub(theirs[0], answer), gold


_DEGREES = re.compile(r"^(?P<deg>\d+(?:\.\d+)?)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree)$")


def _in_radians(text: str) -> str | None:
    r"""An angle in degrees (``30^\circ``) in radians, else None."""
    match = _DEGREES.match(text.strip())
    return None if match is None else f"\\frac{{{match.group('deg')}\\pi}}{{180}}"


def _angle_readings(answer: str, gold: str) -> Iterator[tuple[str, str]]:
    r"""An angle in degrees against one in radians (the other side has ``\pi``)."""
    if "\\pi" in gold and (radians := _in_radians(answer)):
        yield radians, gold
    if "\\pi" in answer and (radians := _in_radians(gold)):
        yield answer, radians


def other_readings(answer: str, gold: str) -> list[tuple[str, str]]:
    r"""Rewritten (answer, gold) pairs to compare when the plain reading fails, each
    different from the input; empty when no form applies.

    >>> other_readings("f(t)=2t+1", "f(x)=2x+1")
    [('2x+1', '2x+1')]
    """
    if len(answer) > MAX_REWRITTEN_CHARS or len(gold) > MAX_REWRITTEN_CHARS:
        return []
    pair = (_with_forms(answer), _with_forms(gold))
    readings = [pair]
    for rewrite in (_component_readings, _definition_readings, _parameter_readings):
        readings += rewrite(*pair)
    readings += [angle for reading in readings for angle in _angle_readings(*reading)]
    unique = dict.fromkeys(r for r in readings if r != (answer.strip(), gold.strip()))
    return list(unique)
