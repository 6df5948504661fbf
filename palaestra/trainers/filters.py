"""Batch filters applied between rollouts and the update (``DESIGN.md`` §6).

- :func:`drop_uniform_groups` (dynamic sampling, DAPO): a group whose returns are all equal
  has zero group-relative advantage everywhere, so it only dilutes the batch.
- :func:`keep_accuracy_band` (balanced difficulty filtering): keep groups whose success rate
  lies in ``[low, high]``.
- :func:`apply_token_budget` (ThinkPrune style): episodes longer than the budget are cut to it
  and given a configurable return.

Groups are the episodes sharing ``Episode.group_id``; an episode with ``group_id=None`` is a
group of its own. Filters never mutate their input; they return new lists (and new episodes
where something changed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from palaestra.core.types import Episode
from palaestra.trainers.advantages import group_indices
from palaestra.trainers.config import FilterConfig

TOKEN_BUDGET_REASON = "token_budget"
"""``Episode.truncation_reason`` of an episode cut by :func:`apply_token_budget`."""


def drop_uniform_groups(episodes: Sequence[Episode], *, atol: float = 1e-9) -> list[Episode]:
    """Keep the groups whose total rewards are not all equal (within ``atol``).

    A group of one episode is uniform by definition and is dropped.
    """

    def varied(group: list[Episode]) -> bool:
        returns = [episode.total_reward for episode in group]
        return max(returns) - min(returns) > atol

    return _keep_groups(episodes, varied)


def keep_accuracy_band(episodes: Sequence[Episode], low: float, high: float) -> list[Episode]:
    """Keep the groups whose success rate lies in ``[low, high]``.

    The success rate is the fraction of episodes with ``success is True`` (``None`` counts as a
    failure). ``low > 0`` drops all-wrong groups, ``high < 1`` drops all-right ones.
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"accuracy band needs 0 <= low <= high <= 1, got ({low}, {high})")

    def in_band(group: list[Episode]) -> bool:
        rate = sum(episode.success is True for episode in group) / len(group)
        return low <= rate <= high

    return _keep_groups(episodes, in_band)


def apply_token_budget(
    episodes: Sequence[Episode], max_tokens: int, *, truncated_reward: float | None = 0.0
) -> list[Episode]:
    """Cut episodes longer than ``max_tokens`` tokens to the budget.

    An over-budget episode keeps its first ``max_tokens`` tokens and the turns that start within
    them (at least one); its ``success`` becomes False and ``truncation_reason`` becomes
    ``"token_budget"``. With ``truncated_reward`` set, the kept turns' rewards become 0 except
    the last, which gets ``truncated_reward`` (so the episode's return is exactly that); with
    ``None`` the kept turns keep their rewards.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    return [
        _cut(episode, max_tokens, truncated_reward)
        if len(episode.token_ids) > max_tokens
        else episode
        for episode in episodes
    ]


def apply_filters(
    episodes: Sequence[Episode], config: FilterConfig
) -> tuple[list[Episode], dict[str, float]]:
    """Apply the filters enabled in ``config``: token budget first, then the group filters.

    Returns the kept episodes and counts for logging (``over_budget``, ``dropped_uniform``,
    ``dropped_band``).
    """
    kept = list(episodes)
    stats: dict[str, float] = {}
    if config.max_tokens is not None:
        stats["over_budget"] = float(sum(len(e.token_ids) > config.max_tokens for e in kept))
        kept = apply_token_budget(kept, config.max_tokens, truncated_reward=config.truncated_reward)
    if config.drop_uniform_groups:
        before = len(kept)
        kept = drop_uniform_groups(kept)
        stats["dropped_uniform"] = float(before - len(kept))
    if config.accuracy_band is not None:
        before = len(kept)
        kept = keep_accuracy_band(kept, *config.accuracy_band)
        stats["dropped_band"] = float(before - len(kept))
    return kept, stats


def _keep_groups(
    episodes: Sequence[Episode], keep: Callable[[list[Episode]], bool]
) -> list[Episode]:
    kept_indices: set[int] = set()
    for members in group_indices([episode.group_id for episode in episodes]):
        if keep([episodes[i] for i in members]):
            kept_indices.update(members)
    return [episode for i, episode in enumerate(episodes) if i in kept_indices]


def _cut(episode: Episode, max_tokens: int, truncated_reward: float | None) -> Episode:
    turn_index = episode.turn_index[:max_tokens]
    num_turns = max(1, max(turn_index, default=-1) + 1)
    turns = list(episode.turns[:num_turns])
    if truncated_reward is not None and turns:
        turns = [dataclasses.replace(turn, reward=0.0) for turn in turns]
        turns[-1] = dataclasses.replace(turns[-1], reward=float(truncated_reward))
    if turns:
        turns[-1] = dataclasses.replace(turns[-1], truncated=True)
    return dataclasses.replace(
        episode,
        turns=turns,
        success=False,
        truncation_reason=TOKEN_BUDGET_REASON,
        token_ids=episode.token_ids[:max_tokens],
        logprobs=episode.logprobs[:max_tokens],
        loss_mask=episode.loss_mask[:max_tokens],
        turn_index=turn_index,
    )
