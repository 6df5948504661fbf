"""Sudoku: unique-solution puzzles, the solver, rules, oracle, shaping."""

from __future__ import annotations

import numpy as np
import pytest

from palaestra.envs.games.sudoku import Sudoku, count_solutions, make_puzzle, random_solution
from palaestra.testing import play


def _valid(grid: list[int]) -> bool:
    units = [[9 * r + c for c in range(9)] for r in range(9)] + [
        [9 * r + c for r in range(9)] for c in range(9)
    ]
    units += [
        [9 * (3 * (b // 3) + r) + 3 * (b % 3) + c for r in range(3) for c in range(3)]
        for b in range(9)
    ]
    return all(sorted(grid[i] for i in unit) == list(range(1, 10)) for unit in units)


def test_generated_grids_are_valid_and_puzzles_unique():
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert _valid(random_solution(rng))
        puzzle, solution = make_puzzle(rng, 26)
        assert _valid(solution) and count_solutions(puzzle) == 1
        assert all(p in (0, s) for p, s in zip(puzzle, solution, strict=True))


def test_solver_counts_solutions():
    solution = random_solution(np.random.default_rng(1))
    assert count_solutions(solution) == 1
    assert count_solutions([0] * 81) == 2  # stops at the limit
    broken = list(solution)
    broken[1] = broken[0]
    assert count_solutions(broken) == 0
    # swapping two digits everywhere in a puzzle with both removed leaves two solutions
    holes = [i for i, v in enumerate(solution) if v in (1, 2)]
    assert count_solutions([0 if i in holes else v for i, v in enumerate(solution)]) == 2


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_solves_every_seed(difficulty):
    env = Sudoku(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert env.clues <= sum(env.given) <= env.clues + 6  # as few as uniqueness allows


def test_moves_that_break_a_rule_or_a_given_are_refused():
    env = Sudoku("easy")
    env.reset(seed=3)
    given = env.given.index(True)
    row, col = divmod(given, 9)
    assert "given digit" in env.step(f"\\boxed{{{row + 1} {col + 1} 5}}")[0]
    empty = env.grid.index(0)
    row, col = divmod(empty, 9)
    clash = next(v for v in env.grid[9 * row : 9 * row + 9] if v)
    assert "already in that cell's row" in env.step(f"\\boxed{{{row + 1} {col + 1} {clash}}}")[0]
    env.step(f"\\boxed{{{row + 1} {col + 1} {env.solution[empty]}}}")
    assert "Erased" in env.step(f"\\boxed{{{row + 1} {col + 1} 0}}")[0] and env.grid[empty] == 0
    for garbage in ["\\boxed{0 1 5}", "\\boxed{10 1 5}", "hello", "\\boxed{1 1}"]:
        observation, reward, terminated, *_ = env.step(garbage)
        assert "could not read" in observation and reward == 0.0 and not terminated


def test_move_spellings():
    env = Sudoku("easy")
    env.reset(seed=5)
    row, col = divmod(env.grid.index(0), 9)
    digit = env.solution[9 * row + col]
    for spelling in [
        f"\\boxed{{{row + 1} {col + 1} {digit}}}",
        f"r{row + 1}c{col + 1}={digit}",
        f"{row + 1},{col + 1},{digit}",
    ]:
        assert "Wrote" in env.step(spelling)[0], spelling


def test_shaping_sums_to_its_weight_over_any_win():
    env = Sudoku("medium", shaping=0.5, max_turns=400)
    rng = np.random.default_rng(2)
    env.reset(seed=0)
    total = sum(env.step(env.random_action(rng))[1] for _ in range(30))
    oracle, done = env.oracle(), False
    while not done:
        _, reward, done, _, info = env.step(oracle(""))
        total += reward
    assert info["success"] and total == pytest.approx(1.5)
