"""Minesweeper: safe first reveal, logic-solvable boards, flood fill, rules, oracle."""

from __future__ import annotations

import numpy as np
import pytest

from palaestra.envs.games.minesweeper import Minesweeper, logic_step, neighbours
from palaestra.testing import play


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_clears_every_seed_by_logic(difficulty):
    env = Minesweeper(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert len(env.mine_cells) == env.mines


def test_first_reveal_is_safe_anywhere():
    env = Minesweeper("hard")
    rng = np.random.default_rng(0)
    for seed in range(50):
        env.reset(seed=seed)
        r, c = (int(v) for v in rng.integers(1, 11, size=2))
        observation, _, terminated, *_ = env.step(f"\\boxed{{reveal {r} {c}}}")
        assert not terminated or "Cleared" in observation
        first = (r - 1, c - 1)
        assert not ({first, *neighbours(first, 10, 10)} & env.mine_cells)


def test_numbers_flood_fill_and_mines_end_the_game():
    env = Minesweeper(rows=4, cols=4, mines=1)
    env.reset(seed=0)
    env.step(r"\boxed{reveal 1 1}")
    assert all(
        env.revealed[cell] == sum(n in env.mine_cells for n in neighbours(cell, 4, 4))
        for cell in env.revealed
    )
    assert len(env.revealed) > 1  # a 0 opens its neighbours
    (mine,) = env.mine_cells
    observation, reward, terminated, _, info = env.step(
        f"\\boxed{{reveal {mine[0] + 1} {mine[1] + 1}}}"
    )
    assert "Boom" in observation and terminated and reward == 0.0 and info["success"] is False


def test_flags_and_bad_moves():
    env = Minesweeper("easy", max_turns=20)
    env.reset(seed=1)
    assert "Flagged row 1, column 1" in env.step(r"\boxed{flag 1 1}")[0]
    assert "Unflagged" in env.step(r"\boxed{unflag 1 1}")[0]
    env.step(r"\boxed{reveal 3 3}")
    assert "already revealed" in env.step(r"\boxed{reveal 3 3}")[0]
    for garbage in [r"\boxed{reveal 9 9}", "dig here", r"\boxed{reveal}", "\x00"]:
        _, reward, terminated, *_ = env.step(garbage)
        assert reward == 0.0 and not terminated


def test_logic_rules():
    # a 1 with one unknown neighbour: that neighbour is a mine; a 0's neighbours are safe
    revealed = {(0, 0): 1, (0, 1): 1, (1, 0): 1}
    safe, mines = logic_step(revealed, set(), 2, 2)
    assert mines == {(1, 1)} and not safe


def test_logic_is_sound_on_random_positions():
    """Whatever the visible numbers and correct flags, every cell the deduction calls safe
    holds no mine and every cell it calls a mine holds one (rectangular boards included)."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        rows, cols = (int(v) for v in rng.integers(2, 12, size=2))
        cells = [(r, c) for r in range(rows) for c in range(cols)]
        count = int(rng.integers(0, len(cells) // 3 + 1))
        mines = {cells[int(i)] for i in rng.choice(len(cells), size=count, replace=False)}
        shown = rng.random(len(cells)) < rng.random()
        revealed = {
            cell: sum(n in mines for n in neighbours(cell, rows, cols))
            for cell, show in zip(cells, shown, strict=True)
            if show and cell not in mines
        }
        flagged = {cell for cell in mines if rng.random() < 0.3}
        safe, found = logic_step(revealed, flagged, rows, cols)
        assert not safe & mines and found <= mines
        assert not (safe | found) & (set(revealed) | flagged)


def test_shaping_sums_to_its_weight_over_any_win():
    env = Minesweeper("medium", shaping=0.5)
    for seed in range(10):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert sum(step[2] for step in transcript[1:]) == pytest.approx(1.5)
