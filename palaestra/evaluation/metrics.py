"""Per-env summaries of evaluation episodes, including unbiased pass@k."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from palaestra.core.types import Episode


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``c`` successes among ``n`` samples (Chen et al. 2021).

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class EnvSummary:
    """Aggregate results of one env id. Errored episodes count only in ``errors``: the means
    are over the ``completed`` episodes (None when none completed), so a row with errors is
    not the whole evaluation (``complete`` is False)."""

    env_id: str
    episodes: int
    distinct_tasks: int
    """How many different tasks the clean episodes played: dataset rows (``problem_id``) where
    the env reports them, else reset seeds."""
    errors: int
    completed: int
    mean_reward: float | None
    success_rate: float | None
    mean_turns: float | None
    mean_tokens: float | None
    wall_time_s: float
    pass_at: dict[int, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every episode finished (the means describe all of them)."""
        return self.errors == 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["complete"] = self.complete
        if not self.complete:
            data["means_over"] = f"{self.completed} completed of {self.episodes} episodes"
        return data


def summarize(
    episodes: Iterable[Episode],
    *,
    pass_ks: Sequence[int] = (),
    wall_times: dict[str, float] | None = None,
) -> list[EnvSummary]:
    """One :class:`EnvSummary` per env id, in first-seen order.

    ``pass_ks`` needs every group (same ``group_id``) to hold at least ``k`` clean episodes;
    ``wall_times`` maps env ids to the wall time from their first episode's start to their
    last episode's end (default: the sum of their episodes' durations).
    """
    by_env: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        by_env[episode.env_id].append(episode)
    return [
        _summarize_env(env_id, eps, pass_ks, wall_times or {}) for env_id, eps in by_env.items()
    ]


def _summarize_env(
    env_id: str, episodes: list[Episode], pass_ks: Sequence[int], wall_times: dict[str, float]
) -> EnvSummary:
    clean = [e for e in episodes if e.error is None]
    token_counts = [sum(len(t.token_ids) for t in e.turns) for e in clean]
    summary = EnvSummary(
        env_id=env_id,
        episodes=len(episodes),
        distinct_tasks=len({e.seed if e.problem_id is None else e.problem_id for e in clean}),
        errors=len(episodes) - len(clean),
        completed=len(clean),
        mean_reward=_mean([e.total_reward for e in clean]),
        success_rate=_mean([float(bool(e.success)) for e in clean]),
        mean_turns=_mean([e.num_turns for e in clean]),
        mean_tokens=_mean(token_counts) if any(token_counts) else None,
        wall_time_s=wall_times.get(env_id, sum(e.duration_s for e in episodes)),
    )
    groups: dict[Any, list[bool]] = defaultdict(list)
    for e in clean:
        groups[(e.group_id, e.seed)].append(bool(e.success))
    for k in pass_ks:
        if not groups or any(len(successes) < k for successes in groups.values()):
            continue  # not enough clean samples per task for this k
        values = [pass_at_k(len(s), sum(s), k) for s in groups.values()]
        summary.pass_at[k] = sum(values) / len(values)
    return summary


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
