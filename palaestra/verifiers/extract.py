"""Pull the answer out of a model's completion. Every function runs in linear time."""

from __future__ import annotations

import re

_BOXED_OR_BRACE = re.compile(r"\\boxed\{|[{}]")


def last_boxed(text: str) -> str | None:
    r"""Content of the last complete ``\boxed{...}`` in ``text`` (nested braces balanced).

    Returns None when there is none. One pass over the braces, so hostile inputs such as a
    megabyte of unclosed ``\boxed{`` stay linear.

    >>> last_boxed(r"so \boxed{\frac{1}{2}} and not \boxed{3")
    '\\frac{1}{2}'
    """
    open_stack: list[int] = []  # content start of a \boxed{, or -1 for a plain brace
    best: tuple[int, int] | None = None
    for match in _BOXED_OR_BRACE.finditer(text):
        token = match.group()
        if token == "}":
            if not open_stack:
                continue
            start = open_stack.pop()
            if start >= 0 and (best is None or start > best[0]):
                best = (start, match.start())
        else:
            open_stack.append(match.end() if token != "{" else -1)
    return None if best is None else text[best[0] : best[1]]
