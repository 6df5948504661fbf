"""Turn-level advantage estimators (``DESIGN.md`` §6).

Every estimator takes the per-turn rewards of a batch of episodes (``rewards[n][t]`` is the
reward of turn ``t`` of episode ``n``) and returns per-turn advantages of the same shape.
Group-relative estimators also take ``group_ids`` (one hashable per episode; episodes of one
task rolled out G times share an id).

Notation, for episode n with turn rewards r_0 .. r_{T-1} and discount gamma:

- return-to-go ``G_t = sum_{k>=t} gamma^(k-t) r_k``;
- episode return ``R = G_0`` (the plain sum of rewards when gamma = 1).

Standard deviations are population standard deviations (``ddof=0``); ``eps`` keeps the division
finite, so a group or batch whose values are all equal gets advantage 0.

>>> compute_advantages("drgrpo", [[1.0], [0.0]], group_ids=[0, 0])
[[0.5], [-0.5]]
"""

from __future__ import annotations

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
    mean, std = float(flat.mean()), float(flat.std())
    return [[(g - mean) / (std + eps) for g in episode] for episode in returns]


def grpo(
    rewards: Rewards,
    group_ids: Sequence[Hashable | None],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> Advantages:
    """GRPO: ``A = (R - mean(R_group)) / (std(R_group) + eps)``, the same A on every turn."""
    episode_returns = _episode_returns(rewards, group_ids, gamma)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        group = episode_returns[members]
        advantages[members] = (group - group.mean()) / (group.std() + eps)
    return _broadcast_to_turns(advantages, rewards)


def drgrpo(
    rewards: Rewards, group_ids: Sequence[Hashable | None], *, gamma: float = 1.0
) -> Advantages:
    """Dr. GRPO: ``A = R - mean(R_group)`` (no std division), the same A on every turn.

    The other half of Dr. GRPO, no length normalization, is the loss aggregation mode
    ``seq-mean-token-sum`` in :mod:`palaestra.trainers.losses`.
    """
    episode_returns = _episode_returns(rewards, group_ids, gamma)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        group = episode_returns[members]
        advantages[members] = group - group.mean()
    return _broadcast_to_turns(advantages, rewards)


def rloo(
    rewards: Rewards, group_ids: Sequence[Hashable | None], *, gamma: float = 1.0
) -> Advantages:
    """REINFORCE leave-one-out: ``A_i = R_i - mean_{j != i} R_j`` within the group.

    Equivalently ``A_i = G/(G-1) * (R_i - mean(R_group))`` for a group of size G >= 2.
    """
    episode_returns = _episode_returns(rewards, group_ids, gamma)
    advantages = np.zeros(len(rewards))
    for members in group_indices(group_ids):
        if len(members) < 2:
            raise ValueError(
                f"rloo needs at least 2 episodes per group, but episode {members[0]} is alone "
                "in its group; roll each task out at least twice (group size >= 2)"
            )
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
    """
    _check_group_ids(rewards, group_ids)
    returns = reinforce(rewards, gamma=gamma)
    advantages: Advantages = [[0.0] * len(episode) for episode in returns]
    for members in group_indices(group_ids):
        longest = max(len(returns[n]) for n in members)
        for t in range(longest):
            reached = [n for n in members if t < len(returns[n])]
            values = np.asarray([returns[n][t] for n in reached], dtype=np.float64)
            normalized = (values - values.mean()) / (values.std() + eps)
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


def compute_advantages(
    estimator: str,
    rewards: Rewards,
    group_ids: Sequence[Hashable | None] | None = None,
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> Advantages:
    """Per-turn advantages with the estimator named ``estimator`` (a key of :data:`ESTIMATORS`).

    >>> compute_advantages("reinforce", [[0.0, 1.0]], gamma=0.5)
    [[0.5, 1.0]]
    """
    if estimator not in ESTIMATORS:
        raise ValueError(
            f"unknown advantage estimator {estimator!r}; choose one of {sorted(ESTIMATORS)}"
        )
    kwargs: dict[str, float] = {"gamma": gamma}
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


def _episode_returns(
    rewards: Rewards, group_ids: Sequence[Hashable | None], gamma: float
) -> np.ndarray:
    _check_group_ids(rewards, group_ids)
    return np.asarray(
        [discounted_returns(episode, gamma)[0] if len(episode) else 0.0 for episode in rewards],
        dtype=np.float64,
    )


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


def _check_gamma(gamma: float) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"discount gamma must lie in [0, 1], got {gamma}")
