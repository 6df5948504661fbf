"""Batch filters: group selection and the token budget."""

from __future__ import annotations

import dataclasses
import math

import pytest

from palaestra.trainers.config import AdvantageConfig, FilterConfig
from palaestra.trainers.filters import (
    TOKEN_BUDGET_REASON,
    apply_filters,
    apply_token_budget,
    drop_nonfinite,
    drop_stale,
    drop_uniform_groups,
    keep_accuracy_band,
)
from tests.trainers.factories import episode


def _groups(episodes) -> list:
    return [e.group_id for e in episodes]


def test_drop_uniform_groups_keeps_only_groups_with_different_returns() -> None:
    batch = [
        episode([1.0], group_id="all-right"),
        episode([1.0], group_id="all-right"),
        episode([0.0, 1.0], group_id="mixed"),  # return 1
        episode([0.0], group_id="mixed"),  # return 0
        episode([0.0], group_id="all-wrong"),
        episode([0.0], group_id="all-wrong"),
        episode([1.0], group_id=None),  # a group of one is uniform
    ]
    for estimator in ("grpo", "drgrpo", "rloo", "turn_grpo"):
        assert _groups(drop_uniform_groups(batch, estimator)) == ["mixed", "mixed"]


def test_uniform_is_judged_by_the_estimator_in_use() -> None:
    # [1, 0] and [0, 1] both total 1: no signal for GRPO, but turn_grpo compares the returns
    # to go at turn 1 (0 vs 1), so the group is kept (it used to be dropped)
    batch = [episode([1.0, 0.0], group_id=0), episode([0.0, 1.0], group_id=0)]
    assert drop_uniform_groups(batch, "grpo") == []
    assert len(drop_uniform_groups(batch, "turn_grpo")) == 2
    assert len(drop_uniform_groups(batch, "turn_grpo", gamma=0.5)) == 2
    with pytest.raises(ValueError, match="group-relative estimator"):
        drop_uniform_groups(batch, "rebn")


def test_drop_nonfinite_keeps_only_finite_rewards_and_logprobs() -> None:
    good = episode([1.0])
    nan_reward = episode([math.nan])
    inf_logprob = dataclasses.replace(good, logprobs=[0.0, 0.0, -math.inf, 0.0])
    assert drop_nonfinite([good, nan_reward, inf_logprob]) == [good]


def test_accuracy_band_keeps_groups_whose_success_rate_is_inside() -> None:
    batch = [
        *(episode([1.0], group_id="easy", success=True) for _ in range(4)),  # rate 1.0
        *(episode([1.0], group_id="mid", success=s) for s in (True, False, False, None)),  # 0.25
        *(episode([0.0], group_id="hard", success=False) for _ in range(4)),  # rate 0.0
    ]
    assert set(_groups(keep_accuracy_band(batch, 0.1, 0.9))) == {"mid"}
    assert set(_groups(keep_accuracy_band(batch, 0.0, 0.25))) == {"mid", "hard"}
    assert set(_groups(keep_accuracy_band(batch, 0.5, 1.0))) == {"easy"}


def test_accuracy_band_rejects_a_reversed_band() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        keep_accuracy_band([], 0.8, 0.2)


def test_token_budget_cuts_and_rewards_over_budget_episodes() -> None:
    # 2 prompt tokens + 2 tokens per turn: 3 turns = 8 tokens, turn_index [-1,-1,0,0,1,1,2,2]
    long = episode([0.5, 0.0, 1.0], success=True)
    short = episode([1.0], success=True)  # 4 tokens
    cut, kept = apply_token_budget([long, short], max_tokens=5, truncated_reward=-1.0)
    assert kept is short
    # first 5 tokens reach turn 1 -> turns 0 and 1 are kept, rewards [0, -1]
    assert cut.token_ids == long.token_ids[:5]
    assert cut.turn_index == [-1, -1, 0, 0, 1]
    assert len(cut.loss_mask) == len(cut.logprobs) == 5
    assert cut.rewards == [0.0, -1.0]
    assert cut.total_reward == -1.0
    assert cut.success is False
    assert cut.truncation_reason == TOKEN_BUDGET_REASON
    assert cut.turns[-1].truncated
    assert long.rewards == [0.5, 0.0, 1.0] and len(long.token_ids) == 8  # input untouched


def test_token_budget_without_reward_keeps_the_kept_turns_rewards() -> None:
    (cut,) = apply_token_budget([episode([0.5, 0.0, 1.0])], max_tokens=5, truncated_reward=None)
    assert cut.rewards == [0.5, 0.0]


def test_apply_filters_runs_budget_then_group_filters_and_counts() -> None:
    batch = [
        episode([1.0], group_id=0, success=True),
        episode([0.0, 0.0, 1.0], group_id=0, success=True),  # over budget -> return 0
        episode([1.0], group_id=1, success=True),
        episode([1.0], group_id=1, success=True),
    ]
    config = FilterConfig(max_tokens=6, truncated_reward=0.0, drop_uniform_groups=True)
    batch.append(episode([math.inf], group_id=2))
    kept, stats = apply_filters(batch, config, AdvantageConfig(estimator="grpo"))
    # group 0 becomes [1, 0] (varied) and is kept; group 1 is uniform and dropped; the
    # episode with an infinite reward goes first
    assert _groups(kept) == [0, 0]
    assert kept[1].total_reward == 0.0
    assert stats == {
        "dropped_nonfinite": 1.0,
        "over_budget": 1.0,
        "dropped_uniform": 2.0,
    }


def test_drop_stale_keeps_episodes_within_the_staleness_bound() -> None:
    batch = [dataclasses.replace(episode([1.0]), policy_version=v) for v in (3, 4, 5, 6)]
    # current version 6, bound 2: versions 4, 5, 6 lag by 2, 1, 0; version 3 lags by 3
    assert [e.policy_version for e in drop_stale(batch, 6, 2)] == [4, 5, 6]
    assert [e.policy_version for e in drop_stale(batch, 6, 0)] == [6]
