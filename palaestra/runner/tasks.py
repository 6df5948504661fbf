"""What the runner rolls out: tasks (env id + seed), optionally in groups of G rollouts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

_NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


class Task(NamedTuple):
    """One episode to run: the env id, its kwargs, the reset seed and reset options.

    Rollouts of one group share ``env_id``, ``env_kwargs``, ``seed`` and ``options`` (the
    same task) and differ in ``sample_index``, which seeds the agent's per-episode rng.
    ``options`` go to ``reset``; ``{"index": i}`` asks a dataset env for row ``i``.
    Immutable, and a named tuple rather than a frozen dataclass because runs build one per
    episode (three times cheaper).
    """

    env_id: str
    seed: int | None = None
    env_kwargs: Mapping[str, Any] = _NO_KWARGS
    group_id: int | None = None
    sample_index: int = 0
    options: Mapping[str, Any] | None = None

    @property
    def env_key(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """Hashable identity of the env this task needs (id + kwargs)."""
        if not self.env_kwargs:
            return self.env_id, ()
        return self.env_id, tuple(sorted(self.env_kwargs.items()))


def make_tasks(
    env_ids: Iterable[str],
    seeds: Iterable[int | None] | None = None,
    *,
    indices: Iterable[int] | None = None,
    group_size: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[Task]:
    """Every env id times every seed (or every row index), each repeated ``group_size`` times
    as one group.

    ``indices`` asks dataset envs for those rows (reset option ``{"index": i}``, seed ``i``),
    so ``indices=range(len(source))`` runs every problem exactly once per rollout.

    >>> [t.seed for t in make_tasks(["game:Wordle-v0"], [0, 1], group_size=2)]
    [0, 0, 1, 1]
    >>> make_tasks(["code:HumanEval-v0"], indices=[7])[0].options
    {'index': 7}
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if (seeds is None) == (indices is None):
        raise ValueError("give seeds= or indices=, not both (nor neither)")
    if indices is not None:
        starts = [(index, {"index": index}) for index in indices]
    else:
        starts = [(seed, None) for seed in seeds]  # type: ignore[union-attr]
    kwargs = dict(env_kwargs or {})
    tasks = []
    group_id = 0
    for env_id in env_ids:
        for seed, options in starts:
            tasks.extend(
                Task(env_id, seed, kwargs, group_id, i, options) for i in range(group_size)
            )
            group_id += 1
    return tasks
