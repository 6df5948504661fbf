"""Frozen lake: solvable maps, the shortest-path and value-iteration oracles, slipping."""

from __future__ import annotations

import numpy as np
import pytest

import palaestra
from palaestra.envs.games.frozen_lake import FrozenLake
from palaestra.testing import play


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_maps_are_solvable_and_the_oracle_walks_a_shortest_path(difficulty):
    env = FrozenLake(difficulty)
    for seed in range(100):
        env.reset(seed=seed)
        shortest = env._distance[env.start_cell]
        assert shortest >= env.size - 1 and env.start_cell != env.goal
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert len(transcript) - 1 == shortest


def test_slippery_oracle_wins_as_often_as_value_iteration_predicts():
    env = palaestra.make("game:FrozenLake-Slippery-v0")
    assert not env.oracle_always_wins and env.unwrapped.slippery
    predicted, wins = [], 0
    for seed in range(200):
        env.reset(seed=seed)
        predicted.append(env.unwrapped.slippery_plan()[1])
        wins += play(env, seed)[-1][5] is True
    assert abs(wins / 200 - np.mean(predicted)) < 0.1
    random_wins = sum(play(env, seed, "random")[-1][5] is True for seed in range(200))
    assert wins > 2 * random_wins  # random moves that keep out of the holes the map shows


def test_slipping_goes_sideways_a_third_of_the_time_each():
    env = FrozenLake(size=5, holes=0.0, slippery=True, max_turns=1)
    counts = {}
    for seed in range(600):
        env.reset(seed=seed)
        env.position = (2, 2)
        env.step(r"\boxed{up}")
        counts[env.position] = counts.get(env.position, 0) + 1
    assert set(counts) == {(1, 2), (2, 1), (2, 3)}
    assert all(150 < n < 250 for n in counts.values())


def test_holes_end_the_episode_and_bad_moves_cost_a_turn():
    env = FrozenLake(size=3, holes=0.0, max_turns=3)
    env.reset(seed=0)
    env.position, env.goal = (0, 0), (2, 2)
    observation, reward, terminated, *_ = env.step("jump")
    assert "could not read" in observation and reward == 0.0 and not terminated
    assert "2 moves left" in observation
    assert "stayed in place" in env.step(r"\boxed{up}")[0]
    env.holes = frozenset({(1, 0)})
    observation, reward, terminated, _, info = env.step(r"\boxed{d}")
    assert "hole" in observation and terminated and info["success"] is False


def test_same_seed_same_lake():
    first, second = FrozenLake("hard"), FrozenLake("hard")
    assert first.reset(seed=9)[0] == second.reset(seed=9)[0]
    assert first.reset(seed=9)[0] != first.reset(seed=10)[0]


def test_shaping_sums_to_its_weight_over_any_win():
    env = FrozenLake("medium", shaping=0.5, max_turns=200)
    rng = np.random.default_rng(1)
    won = 0
    for seed in range(20):
        env.reset(seed=seed)
        oracle, total = env.oracle(), 0.0
        for turn in range(200):
            action = env.random_action(rng) if turn < 4 else oracle("")
            _, reward, done, _, info = env.step(action)
            total += reward
            if done:
                break
        if info["success"]:
            won += 1
            assert total == pytest.approx(1.5)
        else:
            assert total < 0.5  # fell in a hole while wandering: never more than the weight
    assert won >= 10


def test_start_and_goal_move_with_the_seed_and_p_is_explained():
    env = FrozenLake("medium")
    places = set()
    for seed in range(30):
        observation, _ = env.reset(seed=seed)
        places.add((env.start_cell, env.goal))
        grid = env.render_grid().splitlines()
        assert grid[env.start_cell[0]][env.start_cell[1]] == "P"
        assert grid[env.goal[0]][env.goal[1]] == "G"
    assert len(places) > 20
    assert "P marks where you stand" in observation


def test_random_moves_avoid_the_holes_the_map_shows():
    env = FrozenLake(size=4, holes=0.0)
    env.reset(seed=0)
    env.position = (1, 1)
    env.holes = frozenset({(0, 1), (1, 0), (2, 1)})
    rng = np.random.default_rng(0)
    assert {env.random_action(rng) for _ in range(20)} == {r"\boxed{right}"}
