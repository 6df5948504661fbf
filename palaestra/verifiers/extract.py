"""Pull the answer out of a model's completion. Every function runs in linear time."""

from __future__ import annotations

import re

_BOXED = "\\boxed{"
_BOXED_OR_BRACE = re.compile(r"\\boxed\{|[{}]")


def last_boxed(text: str) -> str | None:
    r"""Content of the last complete ``\boxed{...}`` in ``text`` (nested braces balanced).

    Returns None when there is none. Linear time, so hostile inputs such as a megabyte of
    unclosed ``\boxed{`` stay cheap.

    >>> last_boxed(r"so \boxed{\frac{1}{2}} and not \boxed{3")
    '\\frac{1}{2}'
    """
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    content = start + len(_BOXED)
    close = text.find("}", content)
    if close >= 0 and text.find("{", content, close) < 0:
        # The common case: the last \boxed{ holds no braces and is closed by the next one.
        return text[content:close]
    return _last_boxed_by_scan(text)


def _last_boxed_by_scan(text: str) -> str | None:
    """:func:`last_boxed` in one pass over every brace (nested or unclosed answers)."""
    spans = _boxed_spans(text)
    if not spans:
        return None
    start, end = max(spans)
    return text[start:end]


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    r"""(start, end) of the content of every complete ``\boxed{...}``, in closing order."""
    open_stack: list[int] = []  # content start of a \boxed{, or -1 for a plain brace
    spans = []
    for match in _BOXED_OR_BRACE.finditer(text):
        token = match.group()
        if token == "}":
            if not open_stack:
                continue
            start = open_stack.pop()
            if start >= 0:
                spans.append((start, match.start()))
        else:
            open_stack.append(match.end() if token != "{" else -1)
    return spans


def boxed_contents(text: str) -> list[str]:
    r"""The content of every complete ``\boxed{...}`` in ``text``, in reading order.

    Nested boxes count on their own. Linear time (one pass over the braces).

    >>> boxed_contents(r"x = \boxed{2} or x = \boxed{-3}, not \boxed{4")
    ['2', '-3']
    """
    if _BOXED not in text:
        return []
    return [text[start:end] for start, end in sorted(_boxed_spans(text))]


_ANSWER_PHRASE = re.compile(
    r"(?:final answer|the answer|answer)\s*(?:is|:|=)\s*(?::\s*)?", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"\n|\.(?:\s|$)|;\s")
_NUMBER = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?")
EXTRACTION_ORDER = ("boxed", "answer_tag", "phrase", "last_number")
"""Strategies :func:`extract_answer` tries, most explicit first."""


def last_tagged(text: str, tag: str = "answer") -> str | None:
    """Content of the last complete ``<tag>...</tag>`` in ``text``, or None.

    >>> last_tagged("<answer>1</answer> then <answer> 2 </answer>")
    ' 2 '
    """
    close = text.rfind(f"</{tag}>")
    if close < 0:
        return None
    opening = f"<{tag}>"
    start = text.rfind(opening, 0, close)
    if start < 0:
        return None
    return text[start + len(opening) : close]


def answer_phrase(text: str) -> str | None:
    """What follows the last "the answer is" / "answer:" up to the end of its sentence, or None.

    >>> answer_phrase("So the final answer is 42. Done.")
    '42'
    """
    last = None
    for last in _ANSWER_PHRASE.finditer(text):  # noqa: B007  (we want the last match)
        pass
    if last is None:
        return None
    rest = text[last.end() :]
    end = _SENTENCE_END.search(rest)
    answer = (rest if end is None else rest[: end.start()]).strip()
    return answer or None


def last_number(text: str) -> str | None:
    """The last number in ``text`` (integers, decimals, ``a/b``, thousands commas), or None.

    >>> last_number("3 apples and 1,250.5 pears, total")
    '1,250.5'
    """
    last = None
    for last in _NUMBER.finditer(text):  # noqa: B007  (we want the last match)
        pass
    return None if last is None else last.group().rstrip(",")


_STRATEGIES = {
    "boxed": last_boxed,
    "answer_tag": last_tagged,
    "phrase": answer_phrase,
    "last_number": last_number,
}


def extract_answer(text: str, order: tuple[str, ...] = EXTRACTION_ORDER) -> str | None:
    r"""The final answer in a completion: the first strategy in ``order`` that finds one.

    Strategies: ``"boxed"`` (last ``\boxed{}``), ``"answer_tag"`` (last ``<answer>``, with a
    ``\boxed{}`` inside it preferred), ``"phrase"`` ("the answer is ..."), ``"last_number"``.
    Linear time in ``len(text)``.

    >>> extract_answer("<answer>x = 3</answer>")
    'x = 3'
    """
    unknown = [name for name in order if name not in _STRATEGIES]
    if unknown:
        raise ValueError(
            f"unknown extraction strategies {unknown}; choose from {list(_STRATEGIES)}"
        )
    for name in order:
        found = _STRATEGIES[name](text)
        if found is not None and name == "answer_tag":
            found = last_boxed(found) or found
        if found is not None and found.strip():
            return found.strip()
    return None
