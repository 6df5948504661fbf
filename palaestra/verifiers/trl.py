"""Turn any palaestra verifier into a TRL-style reward function.

TRL's ``GRPOTrainer`` calls each reward function as ``fn(prompts=..., completions=...,
**columns)`` where every dataset column arrives as a list aligned with ``completions``, and
expects one float per completion. :func:`as_trl_reward` does that plumbing: it takes the
text of each completion (plain or conversational), hands the verifier that row's columns
(renamed by ``column_map``, e.g. ``answer`` -> ``gold``) and returns the list of floats.

>>> from palaestra.verifiers import math
>>> reward = as_trl_reward(math.verify)
>>> reward(completions=[r"\\boxed{4}", r"\\boxed{5}"], answer=["4", "4"])
[1.0, 0.0]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from palaestra.verifiers.rubric import accepted_kwargs

TrlRewardFn = Callable[..., list[float]]


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a TRL completion: a string, or the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    messages = list(completion)
    if not messages:
        return ""
    content = messages[-1].get("content", "")
    if isinstance(content, list):  # multimodal parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return str(content)


def as_trl_reward(
    verifier: Callable[..., float],
    *,
    column_map: Mapping[str, str] | None = None,
    name: str | None = None,
) -> TrlRewardFn:
    """Wrap ``verifier(completion, **context) -> float`` as a TRL reward function.

    ``column_map`` renames dataset columns to the verifier's keyword names; the default maps
    ``answer`` and ``solution`` to ``gold``. Columns the verifier does not accept are ignored,
    so extra dataset fields are harmless. ``name`` is what TRL logs (default: the verifier's).
    """
    if inspect.iscoroutinefunction(verifier):
        raise TypeError("as_trl_reward needs a sync verifier; TRL calls reward functions sync")
    mapping = dict(column_map) if column_map is not None else {"answer": "gold", "solution": "gold"}

    def reward(
        completions: Sequence[Any], prompts: Sequence[Any] | None = None, **columns: Any
    ) -> list[float]:
        n = len(completions)
        rows: list[dict[str, Any]] = [{} for _ in range(n)]
        for column, values in columns.items():
            key = mapping.get(column, column)
            if isinstance(values, list | tuple) and len(values) == n:
                for row, value in zip(rows, values, strict=True):
                    row[key] = value
        if prompts is not None:
            for row, prompt in zip(rows, prompts, strict=False):
                row.setdefault("prompt", prompt)
        return [
            float(verifier(completion_text(c), **accepted_kwargs(verifier, row)))
            for c, row in zip(completions, rows, strict=True)
        ]

    reward.__name__ = name or getattr(verifier, "__name__", "palaestra_reward")
    reward.__qualname__ = reward.__name__
    return reward
