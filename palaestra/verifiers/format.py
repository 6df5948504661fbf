"""Format rewards: tag structure checks, length and token-budget penalties.

>>> tag_structure("<think>hmm</think> <answer>4</answer>")
1.0
>>> overlong_penalty(950, max_length=1000, buffer=100)
-0.5
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def tag_structure(
    text: str,
    tags: Sequence[str] = ("think", "answer"),
    *,
    ordered: bool = True,
    exclusive: bool = True,
) -> float:
    """1.0 when each tag occurs exactly once as ``<tag>...</tag>``, else 0.0.

    ``ordered``: the blocks appear in the order of ``tags``. ``exclusive``: nothing but
    whitespace lies outside the blocks (the DeepSeek-R1 ``<think>/<answer>`` format).
    """
    if not tags:
        raise ValueError("tags must name at least one tag")
    spans = []
    for tag in tags:
        opening, closing = f"<{tag}>", f"</{tag}>"
        if text.count(opening) != 1 or text.count(closing) != 1:
            return 0.0
        start, end = text.find(opening), text.find(closing)
        if end < start:
            return 0.0
        spans.append((start, end + len(closing)))
    by_start = sorted(spans)
    if ordered and by_start != spans:
        return 0.0
    if any(prev[1] > nxt[0] for prev, nxt in itertools.pairwise(by_start)):
        return 0.0  # blocks overlap or nest
    if exclusive:
        cursor = 0
        for start, end in by_start:
            if text[cursor:start].strip():
                return 0.0
            cursor = end
        if text[cursor:].strip():
            return 0.0
    return 1.0


def tag_fraction(text: str, tags: Sequence[str] = ("think", "answer")) -> float:
    """Partial credit: the fraction of ``tags`` that appear as a complete ``<tag>...</tag>``."""
    if not tags:
        raise ValueError("tags must name at least one tag")
    found = 0
    for tag in tags:
        start = text.find(f"<{tag}>")
        found += start >= 0 and text.find(f"</{tag}>", start) >= 0
    return found / len(tags)


def overlong_penalty(length: int, *, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment, in [-1, 0].

    0 up to ``max_length - buffer``; then falls linearly to -1 at ``max_length``; -1 beyond.
    ``length`` is in whatever unit the budget is (tokens or characters).
    """
    if max_length <= 0 or not 0 < buffer <= max_length:
        raise ValueError(
            f"need max_length > 0 and 0 < buffer <= max_length, got {max_length=} {buffer=}"
        )
    safe = max_length - buffer
    if length <= safe:
        return 0.0
    if length > max_length:
        return -1.0
    return (safe - length) / buffer


def token_budget(reward: float, num_tokens: int, budget: int, *, over_budget: float = 0.0) -> float:
    """ThinkPrune's hard budget: ``reward`` if ``num_tokens <= budget``, else ``over_budget``."""
    if budget <= 0:
        raise ValueError(f"budget must be > 0 tokens, got {budget}")
    return reward if num_tokens <= budget else over_budget


def length_penalty(length: int, *, target: int, scale: float = 1.0) -> float:
    """A linear penalty in [-scale, 0] for exceeding ``target``: ``-scale * excess / target``."""
    if target <= 0:
        raise ValueError(f"target must be > 0, got {target}")
    excess = max(0, length - target)
    return -scale * min(1.0, excess / target)
