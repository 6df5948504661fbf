"""Turn-level advantage estimators (``docs/trainers.md``).

Every estimator takes the per-turn rewards of a batch of episodes (``rewards[n][t]`` is the
reward of turn ``t`` of episode ``n``) and returns per-turn advantages of the same shape.
Group-relative estimators also take ``group_ids`` (one hashable per episode; episodes of one
task rolled out G times share an id).

Notation, for episode n with turn rewards r_0 .. r_{T-1} and discount gamma:

- return-to-go ``G_t = sum_{k>=t} gamma^(k-t) r_k`` (``reinforce``, ``rebn``, ``turn_grpo``);
- episode return ``R = sum_t r_t``, the plain sum (``grpo``, ``drgrpo``, ``rloo``),
  so ``gamma`` has no meaning for them and anything but 1 is rejected.

Standard deviations are sample standard deviations (``ddof=1``), as in verl and TRL, so the
advantages and the learning rates published with them carry over (the population std would make
every advantage ``sqrt(G/(G-1))`` larger: 1.15x for groups of 4). ``eps`` keeps the division
finite, so a group or batch whose values are all equal gets advantage 0. An episode alone in its
group (the others errored or were filtered out) has no baseline and gets 0 from every
group-relative estimator; the run goes on. Non-finite rewards are an error: the trainer drops
such episodes before it gets here (:func:`palaestra.trainers.filters.drop_nonfinite`).

>>> compute_advantages("drgrpo", [[1.0], [0.0]], group_ids=[0, 0])
[[0.5], [-0.5]]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np

Rewards = Sequence[Sequence[float]]
"""Per-episode lists of per-turn rewards."""

Advantages = list[list[float]]
"""Per-episode lists of per-turn advantages (same shape as the rewards)."""

DEFAULT_EPS = 1e-6


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """Return-to-go of every turn: ``G_t = r_t + gamma * G_{t+1}``, ``G_T = 0``.

    >>> discounted_returns([1.0, 0.0, 2.0], gamma=0.5)
    [1.5, 1.0, 2.0]
    """
    _check_gamma(gamma)
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        returns[t] = running
    return returns


def group_indices(group_ids: Sequence[Hashable | None]) -> list[list[int]]:
    """Indices of the episodes of each group, groups in order of first appearance.

    An id of ``None`` puts the episode in a group of its own.

    >>> group_indices(["a", "b", "a", None])
    [[0, 2], [1], [3]]
    """
    groups: dict[Hashable, list[int]] = {}
    singletons = 0
    for index, group_id in enumerate(group_ids):
        key = ("__ungrouped__", singletons) if group_id is None else group_id
        singletons += group_id is None
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def sample_std(values: np.ndarray) -> float:
    """Sample standard deviation (``ddof=1``); 0 for fewer than two values.

    >>> sample_std(np.array([1.0, 0.0]))
    0.7071067811865476
    """
    return float(values.std(ddof=1)) if values.size >= 2 else 0.0


def reinforce(rewards: Rewards, *, gamma: float = 1.0) -> Advantages:
    """REINFORCE: ``A_t = G_t``."""
    return [discounted_returns(episode, gamma) for episode in rewards]


def rebn(rewards: Rewards, *, gamma: float = 1.0, eps: float = DEFAULT_EPS) -> Advantages:
    """REINFORCE with Return Batch Normalization (GEM).

    ``A_t = (G_t - mean(G)) / (std(G) + eps)``, statistics over every turn of every episode.
    """
    returns = reinforce(rewards, gamma=gamma)
    flat = np.asarray([g for episode in returns for g in episode], dtype=np.float64)
    if flat.size == 0:
        return [[] for _ in returns]
    mean, std = float(flat.mean()), sample_std(flat)
    return [[(g - mean) / (std + eps) for g in episode] for episode in returns]


def grpo(
    rewards: Rewards, group_ids: Sequence[Hashable | None], *, eps: float = DEFAULT_EPS
) -> Advantages:
    """GRPO: ``A = (R - mean(R_group)) / (std(R_group) + eps)``, the same A on every turn."""
    episode_returns = _episode_returns(rewards, group_ids)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        if len(members) < 2:
            continue
        group = episode_returns[members]
        advantages[members] = (group - group.mean()) / (sample_std(group) + eps)
    return _broadcast_to_turns(advantages, rewards)


def drgrpo(rewards: Rewards, group_ids: Sequence[Hashable | None]) -> Advantages:
    """Dr. GRPO: ``A = R - mean(R_group)`` (no std division), the same A on every turn.

    The other half of Dr. GRPO, no length normalization, is the loss aggregation mode
    ``seq-mean-token-sum`` in :mod:`palaestra.trainers.losses`; the trainer config selects it
    for ``drgrpo`` unless told otherwise.
    """
    episode_returns = _episode_returns(rewards, group_ids)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        group = episode_returns[members]
        advantages[members] = group - group.mean()
    return _broadcast_to_turns(advantages, rewards)


def rloo(rewards: Rewards, group_ids: Sequence[Hashable | None]) -> Advantages:
    """REINFORCE leave-one-out: ``A_i = R_i - mean_{j != i} R_j`` within the group.

    Equivalently ``A_i = G/(G-1) * (R_i - mean(R_group))`` for a group of size G >= 2; an
    episode alone in its group gets 0.
    """
    episode_returns = _episode_returns(rewards, group_ids)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        if len(members) < 2:
            continue
        group = episode_returns[members]
        others_mean = (group.sum() - group) / (len(members) - 1)
        advantages[members] = group - others_mean
    return _broadcast_to_turns(advantages, rewards)


def turn_grpo(
    rewards: Rewards,
    group_ids: Sequence[Hashable | None],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> Advantages:
    """Turn-level GRPO (AT-GRPO style): normalize ``G_t`` within the group at each turn index.

    ``A_t^n = (G_t^n - mean_m G_t^m) / (std_m G_t^m + eps)`` over the episodes m of the group
    that reached turn t. A turn reached by only one episode of its group gets 0.

    ``[1, 0]`` against ``[0, 1]`` has equal episode returns but different returns-to-go at
    each turn, so (unlike GRPO) it gives non-zero advantages.
    """
    _check_group_ids(rewards, group_ids)
    returns = reinforce(rewards, gamma=gamma)
    advantages: Advantages = [[0.0] * len(episode) for episode in returns]
    for members in group_indices(group_ids):
        longest = max(len(returns[n]) for n in members)
        for t in range(longest):
            reached = [n for n in members if t < len(returns[n])]
            if len(reached) < 2:
                continue
            values = np.asarray([returns[n][t] for n in reached], dtype=np.float64)
            normalized = (values - values.mean()) / (sample_std(values) + eps)
            for n, value in zip(reached, normalized, strict=True):
                advantages[n][t] = float(value)
    return advantages


ESTIMATORS: dict[str, Callable[..., Advantages]] = {
    "reinforce": reinforce,
    "rebn": rebn,
    "grpo": grpo,
    "drgrpo": drgrpo,
    "rloo": rloo,
    "turn_grpo": turn_grpo,
}
"""Estimator name -> function."""

GROUPED_ESTIMATORS = frozenset({"grpo", "drgrpo", "rloo", "turn_grpo"})
"""Estimators that need ``group_ids``."""

_USES_EPS = frozenset({"rebn", "grpo", "turn_grpo"})
DISCOUNTED_ESTIMATORS = frozenset({"reinforce", "rebn", "turn_grpo"})
"""Estimators that take ``gamma``; the others use the plain sum of an episode's rewards."""


def compute_advantages(
    estimator: str,
    rewards: Rewards,
    group_ids: Sequence[Hashable | None] | None = None,
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> Advantages:
    """Per-turn advantages with the estimator named ``estimator`` (a key of :data:`ESTIMATORS`).

    Raises ``ValueError`` on a non-finite reward, and on ``gamma != 1`` for an estimator that
    does not discount (``grpo``, ``drgrpo``, ``rloo``).

    >>> compute_advantages("reinforce", [[0.0, 1.0]], gamma=0.5)
    [[0.5, 1.0]]
    """
    if estimator not in ESTIMATORS:
        raise ValueError(
            f"unknown advantage estimator {estimator!r}; choose one of {sorted(ESTIMATORS)}"
        )
    _check_finite(rewards)
    kwargs: dict[str, float] = {}
    if estimator in DISCOUNTED_ESTIMATORS:
        kwargs["gamma"] = gamma
    elif gamma != 1.0:
        raise ValueError(
            f"estimator {estimator!r} uses the plain sum of an episode's rewards, so gamma "
            f"({gamma}) would have no effect; use gamma 1, or a discounting estimator "
            f"({', '.join(sorted(DISCOUNTED_ESTIMATORS))})"
        )
    if estimator in _USES_EPS:
        kwargs["eps"] = eps
    if estimator in GROUPED_ESTIMATORS:
        if group_ids is None:
            raise ValueError(
                f"estimator {estimator!r} is group-relative and needs group_ids "
                "(one id per episode; episodes of the same task share it)"
            )
        return ESTIMATORS[estimator](rewards, group_ids, **kwargs)
    return ESTIMATORS[estimator](rewards, **kwargs)


def _episode_returns(rewards: Rewards, group_ids: Sequence[Hashable | None]) -> np.ndarray:
    _check_group_ids(rewards, group_ids)
    return np.asarray([float(sum(episode)) for episode in rewards], dtype=np.float64)


def _broadcast_to_turns(episode_advantages: np.ndarray, rewards: Rewards) -> Advantages:
    return [
        [float(advantage)] * len(episode)
        for advantage, episode in zip(episode_advantages, rewards, strict=True)
    ]


def _check_group_ids(rewards: Rewards, group_ids: Sequence[Hashable | None]) -> None:
    if len(group_ids) != len(rewards):
        raise ValueError(
            f"got {len(group_ids)} group ids for {len(rewards)} episodes; pass one id per episode"
        )


def _check_finite(rewards: Rewards) -> None:
    for n, episode in enumerate(rewards):
        for t, reward in enumerate(episode):
            if not math.isfinite(reward):
                raise ValueError(
                    f"reward of episode {n}, turn {t} is {reward}; drop episodes with "
                    "non-finite rewards first (palaestra.trainers.filters.drop_nonfinite)"
                )


def _check_gamma(gamma: float) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"discount gamma must lie in [0, 1], got {gamma}")
