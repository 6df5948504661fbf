"""Advantage estimators against hand-worked numbers."""

from __future__ import annotations

import math

import pytest

from palaestra.trainers.advantages import (
    DISCOUNTED_ESTIMATORS,
    compute_advantages,
    discounted_returns,
    group_indices,
)

approx = pytest.approx

# Two groups: "a" has 1-turn episodes with returns 1 and 0; "b" has a 2-turn episode [0, 2]
# and 1-turn episodes [1] and [3].
REWARDS = [[1.0], [0.0], [0.0, 2.0], [1.0], [3.0]]
GROUPS = ["a", "a", "b", "b", "b"]


def test_discounted_returns_by_hand() -> None:
    # G_2 = 2; G_1 = 0 + 0.5 * 2 = 1; G_0 = 0 + 0.5 * 1 = 0.5
    assert discounted_returns([0.0, 0.0, 2.0], gamma=0.5) == [0.5, 1.0, 2.0]
    # gamma = 0 keeps only the immediate reward
    assert discounted_returns([1.0, 2.0, 3.0], gamma=0.0) == [1.0, 2.0, 3.0]
    assert discounted_returns([], gamma=0.9) == []


def test_gamma_outside_unit_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"gamma must lie in \[0, 1\]"):
        discounted_returns([1.0], gamma=1.5)


def test_group_indices_keeps_first_appearance_order_and_isolates_none() -> None:
    assert group_indices(["x", None, "y", "x", None]) == [[0, 3], [1], [2], [4]]


def test_reinforce_is_the_return_to_go() -> None:
    # episode [0, 2] with gamma 0.5: G_1 = 2, G_0 = 0 + 0.5 * 2 = 1
    assert compute_advantages("reinforce", [[0.0, 2.0], [1.0]], gamma=0.5) == [[1.0, 2.0], [1.0]]


def test_rebn_normalizes_over_all_turns_of_the_batch() -> None:
    # gamma 1: returns [1, 1], [1], [2, 2, 2] -> 6 values, mean 1.5,
    # sample std sqrt(6 * 0.25 / 5) = 0.547723 -> -0.5/0.547723 = -0.912871, +0.912871
    advantages = compute_advantages("rebn", [[0.0, 1.0], [1.0], [0.0, 0.0, 2.0]])
    assert advantages[0] == approx([-0.912871, -0.912871], rel=1e-5)
    assert advantages[1] == approx([-0.912871], rel=1e-5)
    assert advantages[2] == approx([0.912871] * 3, rel=1e-5)


def test_rebn_with_discount_differs_per_turn() -> None:
    # gamma 0.5: returns [0.5, 1], [1]; values 0.5, 1, 1: mean 5/6,
    # std = sqrt(((1/3)^2 + 2 (1/6)^2) / 2) = sqrt(1/12) = 0.288675
    # -> (0.5 - 5/6)/0.288675 = -1.154701, (1 - 5/6)/0.288675 = 0.577350
    advantages = compute_advantages("rebn", [[0.0, 1.0], [1.0]], gamma=0.5)
    assert advantages == [approx([-1.154701, 0.577350], rel=1e-5), approx([0.577350], rel=1e-5)]


def test_grpo_by_hand() -> None:
    # group a: R = 1, 0 -> mean 0.5, sample std 0.707107 -> +0.707107, -0.707107
    # group b: R = 2, 1, 3 -> mean 2, sample std 1 -> 0, -1, +1,
    # the same value on every turn of an episode
    advantages = compute_advantages("grpo", REWARDS, GROUPS)
    expected = [[0.707107], [-0.707107], [0.0, 0.0], [-1.0], [1.0]]
    for got, want in zip(advantages, expected, strict=True):
        assert got == approx(want, rel=1e-5, abs=1e-9)


def test_grpo_gives_zero_to_a_uniform_group() -> None:
    assert compute_advantages("grpo", [[1.0], [1.0]], [0, 0]) == [[0.0], [0.0]]


def test_drgrpo_subtracts_the_group_mean_only() -> None:
    # a: 1 - 0.5, 0 - 0.5; b: 2 - 2, 1 - 2, 3 - 2
    advantages = compute_advantages("drgrpo", REWARDS, GROUPS)
    assert advantages == [[0.5], [-0.5], [0.0, 0.0], [-1.0], [1.0]]


def test_rloo_subtracts_the_mean_of_the_others() -> None:
    # a: 1 - 0 = 1, 0 - 1 = -1; b: 2 - (1+3)/2 = 0, 1 - (2+3)/2 = -1.5, 3 - (2+1)/2 = 1.5
    advantages = compute_advantages("rloo", REWARDS, GROUPS)
    assert advantages == [[1.0], [-1.0], [0.0, 0.0], [-1.5], [1.5]]


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo", "turn_grpo"])
def test_an_episode_alone_in_its_group_gets_zero(estimator: str) -> None:
    # the rest of its group errored: no baseline, advantage 0, and the others are untouched
    # (rloo used to raise and stop the run)
    advantages = compute_advantages(estimator, [[1.0], [1.0], [0.0]], ["lone", "b", "b"])
    assert advantages[0] == [0.0]
    assert advantages[1][0] > 0 > advantages[2][0]


def test_std_is_the_sample_std_as_in_verl_and_trl() -> None:
    # R = 1, 0, 0, 0: mean 0.25, sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    # -> 1.5 and -0.5 (the population std 0.433013 gave 1.732051 and -0.577350)
    advantages = compute_advantages("grpo", [[1.0], [0.0], [0.0], [0.0]], [0, 0, 0, 0])
    assert advantages == [approx([v], rel=1e-5) for v in (1.5, -0.5, -0.5, -0.5)]


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_episode_level_estimators_use_the_plain_sum_and_refuse_a_discount(estimator: str) -> None:
    # The documented return: R = sum_t r_t. A discount would silently change R, so it is refused.
    with pytest.raises(ValueError, match="plain sum"):
        compute_advantages(estimator, [[0.0, 1.0], [1.0]], [0, 0], gamma=0.5)
    # [0, 1] and [1] both sum to 1: no signal
    assert compute_advantages(estimator, [[0.0, 1.0], [1.0]], [0, 0]) == [[0.0, 0.0], [0.0]]


def test_non_finite_rewards_are_an_error() -> None:
    with pytest.raises(ValueError, match="reward of episode 1, turn 0 is nan"):
        compute_advantages("grpo", [[1.0], [math.nan]], [0, 0])


def test_turn_grpo_normalizes_per_turn_index_within_the_group() -> None:
    # gamma 0.5. group a, turn 0: [1, 0] -> +0.707107, -0.707107 (sample std 0.707107).
    # group b: returns-to-go [0 + 0.5*2, 2] = [1, 2], [1], [3].
    #   turn 0: values 1, 1, 3: mean 5/3, std sqrt((4/9 + 4/9 + 16/9)/2) = 1.154701
    #           -> (1 - 5/3)/1.154701 = -0.577350, (3 - 5/3)/1.154701 = 1.154701
    #   turn 1: only one episode reached it -> 0
    advantages = compute_advantages("turn_grpo", REWARDS, GROUPS, gamma=0.5)
    expected = [[0.707107], [-0.707107], [-0.577350, 0.0], [-0.577350], [1.154701]]
    for got, want in zip(advantages, expected, strict=True):
        assert got == approx(want, rel=1e-5, abs=1e-9)
    # plain GRPO puts the episode-level value on both turns instead
    grpo = compute_advantages("grpo", REWARDS, GROUPS)
    assert grpo[2] == [0.0, 0.0]


def test_turn_grpo_sees_signal_that_equal_totals_hide() -> None:
    # [1, 0] and [0, 1] total 1 each, but turn 1's returns-to-go differ (0 vs 1)
    advantages = compute_advantages("turn_grpo", [[1.0, 0.0], [0.0, 1.0]], [0, 0])
    assert advantages[0][1] < 0 < advantages[1][1]


def test_grouped_estimators_need_group_ids() -> None:
    with pytest.raises(ValueError, match="needs group_ids"):
        compute_advantages("grpo", [[1.0]])


def test_group_ids_must_match_episodes() -> None:
    with pytest.raises(ValueError, match="2 group ids for 3 episodes"):
        compute_advantages("drgrpo", [[1.0], [0.0], [1.0]], [0, 0])


def test_unknown_estimator_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown advantage estimator 'ppo'.*'rebn'"):
        compute_advantages("ppo", [[1.0]])


@pytest.mark.parametrize("estimator", ["rebn", "grpo", "drgrpo", "rloo", "turn_grpo"])
def test_output_has_the_shape_of_the_rewards_and_is_finite(estimator: str) -> None:
    rewards = [[0.0, 1.0, 0.5], [2.0], [1.0, 1.0], [0.0]]
    gamma = 0.9 if estimator in DISCOUNTED_ESTIMATORS else 1.0
    advantages = compute_advantages(estimator, rewards, [0, 0, 1, 1], gamma=gamma)
    assert [len(a) for a in advantages] == [3, 1, 2, 1]
    assert all(math.isfinite(value) for episode in advantages for value in episode)
