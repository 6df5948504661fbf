"""2048: sliding and merging, spawning, the expectimax oracle, rules, shaping."""

from __future__ import annotations

import pytest

from palaestra.envs.games.game_2048 import PHYSICAL_MOVES, Game2048, slide, slide_row, turned
from palaestra.testing import play


@pytest.mark.parametrize(
    ("row", "slid", "points"),
    [
        ((2, 2, 2, 2), (4, 4, 0, 0), 8),
        ((2, 0, 2, 4), (4, 4, 0, 0), 4),
        ((4, 4, 8, 0), (8, 8, 0, 0), 8),  # a merged tile does not merge again in the same move
        ((2, 4, 8, 16), (2, 4, 8, 16), 0),
        ((0, 0, 0, 2), (2, 0, 0, 0), 0),
    ],
)
def test_rows_slide_and_merge_once(row, slid, points):
    assert slide_row(row) == (slid, points)


def test_directions():
    board = (2, 0, 0, 2) + (0,) * 12
    assert slide(board, "left")[0][:4] == (4, 0, 0, 0)
    assert slide(board, "right")[0][:4] == (0, 0, 0, 4)
    assert slide(board, "down")[0][12:] == (2, 0, 0, 2)


@pytest.mark.parametrize(
    ("difficulty", "seeds", "floor"), [("easy", 10, 0.9), ("medium", 6, 0.8), ("hard", 4, 0.5)]
)
def test_oracle_win_rate(difficulty, seeds, floor):
    env = Game2048(difficulty)
    wins = sum(play(env, seed)[-1][5] is True for seed in range(seeds))
    assert wins >= seeds * floor


@pytest.mark.slow
@pytest.mark.parametrize(("difficulty", "floor"), [("easy", 0.97), ("medium", 0.9), ("hard", 0.55)])
def test_oracle_win_rate_over_100_seeds(difficulty, floor):
    env = Game2048(difficulty)
    assert sum(play(env, seed)[-1][5] is True for seed in range(100)) >= 100 * floor


def test_moves_that_change_nothing_and_garbage_cost_a_turn():
    env = Game2048(target=64, max_turns=3, spin=False)
    env.reset(seed=0)
    env.board = (2, 4, 8, 16) + (0,) * 12
    observation, reward, terminated, *_ = env.step("\\boxed{up}")
    assert "changes nothing" in observation and reward == 0.0 and not terminated
    assert "could not read" in env.step("jump")[0]
    assert env.board == (2, 4, 8, 16) + (0,) * 12  # no tile appeared
    env.board = (2, 4, 2, 4, 4, 2, 4, 2) * 2
    observation, _, terminated, _, info = env.step("\\boxed{left}")
    assert terminated and info["success"] is False


def test_shaping_sums_to_its_weight_over_any_win():
    env = Game2048(target=64, shaping=0.5)
    for seed in range(5):
        transcript = play(env, seed)
        if transcript[-1][5]:
            assert sum(step[2] for step in transcript[1:]) == pytest.approx(1.5)


def test_moves_name_directions_on_the_board_as_shown():
    env = Game2048(target=2048)
    env.reset(seed=1)
    turns_seen = set()
    for _ in range(12):
        shown, quarter_turns = turned(env.board, env.quarter_turns), env.quarter_turns
        turns_seen.add(quarter_turns)
        assert env.render_board().split("\n")[0].split() == [str(v or ".") for v in shown[:4]]
        before = env.board
        env.step("\\boxed{left}")
        moved = slide(before, PHYSICAL_MOVES[quarter_turns]["left"])[0]
        assert turned(moved, quarter_turns) == slide(shown, "left")[0]  # left on the shown board
        assert all(x == y or x == 0 for x, y in zip(moved, env.board, strict=True))  # + a new tile
    assert len(turns_seen) > 1  # the board spins


def test_without_spin_the_board_never_turns():
    env = Game2048(spin=False)
    env.reset(seed=0)
    for move in ["up", "left", "down", "right"] * 3:
        env.step(f"\\boxed{{{move}}}")
        assert env.quarter_turns == 0
