"""The multi-attempt mechanism every family's -Retry variant uses (palaestra.envs.base)."""

from __future__ import annotations

import pytest

from palaestra.envs.base import RETRY, AnswerEnv, Grade
from palaestra.tasks import Problem


class Echo(AnswerEnv):
    """Solved by answering "42"; a wrong answer scores ``wrong``."""

    def __init__(self, wrong: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.wrong = wrong
        self.reward_range = (-1.0, 1.0)

    def new_problem(self, seed, options):
        return Problem("Say 42.", "42")

    def grade(self, action, problem):
        solved = action == problem.answer
        return Grade(1.0 if solved else self.wrong, solved, "no")


@pytest.mark.parametrize(("misses", "reward"), [(0, 1.0), (1, 0.9), (2, 0.8)])
def test_each_attempt_after_the_first_costs(misses, reward):
    env = Echo(**RETRY)
    env.reset(seed=0)
    for _ in range(misses):
        assert env.step("41")[1] == 0.0  # earlier attempts earn nothing
    _, got, terminated, _, info = env.step("42")
    assert terminated and info["success"] and got == pytest.approx(reward)
    assert info["metrics"]["attempts"] == misses + 1


def test_the_cost_applies_to_the_final_score_within_the_reward_range():
    env = Echo(wrong=-1.0, max_attempts=3, attempt_cost=0.5)
    env.reset(seed=0)
    assert [env.step("41")[1] for _ in range(3)] == [0.0, 0.0, -1.0]  # clamped at -1
    env = Echo(max_attempts=3, attempt_cost=0.5)
    env.reset(seed=0)
    env.step("41"), env.step("41")
    assert env.step("42")[1] == 0.0  # 1 - 2 * 0.5


def test_without_a_cost_retries_are_free_and_bad_costs_are_refused():
    env = Echo(max_attempts=3)
    env.reset(seed=0)
    env.step("41")
    assert env.step("42")[1] == 1.0
    for cost in (-0.1, 1.5):
        with pytest.raises(ValueError, match="attempt_cost"):
            Echo(attempt_cost=cost)
