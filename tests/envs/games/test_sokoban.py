"""Sokoban: generated levels are solvable at graded lengths; pushes, blocks, oracle, shaping."""

from __future__ import annotations

import numpy as np
import pytest

from palaestra.envs.games.sokoban import Level, Sokoban
from palaestra.testing import play


@pytest.mark.parametrize(("difficulty", "low"), [("easy", 5), ("medium", 10), ("hard", 16)])
def test_levels_are_solvable_and_the_oracle_is_optimal(difficulty, low):
    env = Sokoban(difficulty)
    for seed in range(100 if difficulty != "hard" else 40):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert len(transcript) - 1 == env.optimal_moves >= low


def test_pushes_and_blocks():
    level = Level(4, frozenset({(1, 4)}), frozenset({(1, 3)}))
    state = ((1, 1), ((1, 2),))
    pushed = level.move(state, "right")
    assert pushed == ((1, 2), ((1, 3),)) and level.solved(pushed)
    assert level.move(pushed, "right") is None  # the box would go into the wall
    assert level.move(((1, 1), ((1, 2), (1, 3))), "right") is None  # two boxes in a row
    assert level.move(((1, 1), ()), "up") is None  # the outer wall
    assert level.shortest_solution(state) == ["right"]
    assert (
        Level(3, frozenset(), frozenset({(2, 2)})).shortest_solution(((2, 2), ((1, 1),))) is None
    )  # cornered


def test_blocked_and_bad_moves_cost_a_turn_without_changing_the_room():
    env = Sokoban("easy")
    env.reset(seed=1)
    before = env.state
    for action in ["\\boxed{fly}", "", "\\boxed{" + "x" * 100 + "}"]:
        observation, reward, *_ = env.step(action)
        assert "could not read" in observation and reward == 0.0 and env.state == before
    env.state = ((1, 1), env.state[1])  # a corner: up and left are walls
    if (1, 1) not in env.state[1]:
        assert "Blocked" in env.step("\\boxed{up}")[0] and env.state[0] == (1, 1)


def test_same_seed_same_level():
    assert Sokoban("hard").reset(seed=4)[0] == Sokoban("hard").reset(seed=4)[0]


def test_shaping_sums_to_its_weight_over_any_win():
    env = Sokoban("medium", shaping=0.5, max_turns=300)
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        total, done = 0.0, False
        for _ in range(5):
            _, reward, done, *_ = env.step(env.random_action(rng))
            total += reward
            if done:
                break
        oracle = env.oracle()
        while not done:
            _, reward, done, _, info = env.step(oracle(""))
            total += reward
        if info["success"]:  # the random moves may have pushed a box into a corner
            assert total == pytest.approx(1.5)
        else:
            assert total < 1.0
