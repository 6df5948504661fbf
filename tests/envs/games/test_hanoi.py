"""Tower of Hanoi: optimal oracle from any position, rules, shaping."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest

import palaestra
from palaestra.envs.games.hanoi import TowerOfHanoi, next_optimal_move
from palaestra.testing import play


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_solves_in_the_optimal_number_of_moves(difficulty):
    env = TowerOfHanoi(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert len(transcript) - 1 == env.optimal_moves


def _distances_to_goal(disks: int) -> dict:
    """BFS over every legal position: moves to the complete stack on peg C."""

    def moves(state):
        for source, target in itertools.permutations(range(3), 2):
            tops = [
                min((d for d in range(1, disks + 1) if state[d - 1] == p), default=None)
                for p in range(3)
            ]
            if tops[source] is not None and (tops[target] is None or tops[target] > tops[source]):
                new = list(state)
                new[tops[source] - 1] = target
                yield (source, target), tuple(new)

    goal = (2,) * disks
    distance = {goal: 0}
    queue = deque([goal])
    while queue:
        state = queue.popleft()
        for _, previous in moves(state):  # moves are reversible
            if previous not in distance:
                distance[previous] = distance[state] + 1
                queue.append(previous)
    return distance, moves


def test_next_move_is_optimal_from_every_position():
    disks = 4
    distance, moves = _distances_to_goal(disks)
    assert len(distance) == 3**disks
    for state, steps in distance.items():
        pegs = tuple(
            tuple(sorted((d for d in range(1, disks + 1) if state[d - 1] == p), reverse=True))
            for p in range(3)
        )
        move = next_optimal_move(pegs, disks)
        if steps == 0:
            assert move is None
            continue
        successor = dict(moves(state))[move]
        assert distance[successor] == steps - 1


def test_illegal_and_garbage_moves_cost_a_turn_and_are_explained():
    env = TowerOfHanoi("easy", max_turns=5)
    env.reset(seed=0)
    env.pegs, env.target = [[3, 2, 1], [], []], 2
    for action, expected in [
        (r"\boxed{B C}", "peg B is empty"),
        (r"\boxed{A A}", "would stay"),
        ("fly to the moon", "could not read"),
    ]:
        observation, reward, terminated, *_ = env.step(action)
        assert expected in observation and reward == 0.0 and not terminated
    env.step(r"\boxed{A C}")
    observation, _, terminated, _, info = env.step(r"\boxed{A C}")
    assert "cannot go on the smaller disk 1" in observation
    assert terminated and info["success"] is False


def test_move_spellings():
    env = TowerOfHanoi("easy")
    for spelling in [r"\boxed{A C}", r"\boxed{a->c}", r"\boxed{A,C}", "A to C", "a c"]:
        env.reset(seed=0)
        env.pegs = [[3, 2, 1], [], []]
        assert "Moved disk 1 from A to C" in env.step(spelling)[0], spelling


def test_shaping_sums_to_its_weight_over_a_win_whatever_the_path():
    env = TowerOfHanoi("medium", shaping=0.5, max_turns=500)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    total = 0.0
    for _ in range(40):  # wander first
        total += env.step(env.random_action(rng))[1]
    oracle = env.oracle()
    done = False
    while not done:
        _, reward, done, _, info = env.step(oracle(""))
        total += reward
    assert info["success"] and total == pytest.approx(1.5)


def test_the_seed_picks_the_pegs():
    env = TowerOfHanoi("easy")
    starts = {env.reset(seed=seed)[0].split("from peg ")[1][:11] for seed in range(40)}
    assert len(starts) == 6


def test_registered_variants():
    assert palaestra.make("game:TowerOfHanoi-Hard-v0").unwrapped.disks == 5
    with pytest.raises(ValueError, match="disks"):
        TowerOfHanoi(disks=0)
