"""2048: slide the tiles of a 4x4 board, merging equal ones, until the target tile appears."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"target": 128},
    "medium": {"target": 256},
    "hard": {"target": 512},
}
MOVES = ("up", "down", "left", "right")
_ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", "w": "up", "s": "down", "a": "left"}
SYSTEM_PROMPT = (
    "You are playing 2048. Think step by step, then give one move inside \\boxed{}: up, down, "
    "left or right, for example \\boxed{left}."
)

Board = tuple[int, ...]
"""16 cells, row by row; 0 is empty, else the tile's value."""


@functools.lru_cache(maxsize=65536)
def slide_row(row: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """A row slid to the left (each tile merges at most once) and the points the merges made."""
    tiles = [v for v in row if v]
    out, points, i = [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            points += 2 * tiles[i]
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return tuple(out + [0] * (len(row) - len(out))), points


def _lines(direction: str) -> list[list[int]]:
    """Cell indices of each line, listed in the direction the tiles slide towards."""
    rows = [[4 * r + c for c in range(4)] for r in range(4)]
    cols = [[4 * r + c for r in range(4)] for c in range(4)]
    return {
        "left": rows,
        "right": [line[::-1] for line in rows],
        "up": cols,
        "down": [line[::-1] for line in cols],
    }[direction]


LINES = {direction: _lines(direction) for direction in MOVES}


def slide(board: Board, direction: str) -> tuple[Board, int]:
    """The board after sliding ``direction`` (no new tile), and the merge points."""
    cells = list(board)
    total = 0
    for line in LINES[direction]:
        moved, points = slide_row(tuple(board[i] for i in line))
        total += points
        for index, value in zip(line, moved, strict=True):
            cells[index] = value
    return tuple(cells), total


def turned(board: Board, quarter_turns: int) -> Board:
    """The board turned clockwise by ``quarter_turns`` (cell (r, c) goes to (c, 3 - r))."""
    for _ in range(quarter_turns % 4):
        board = tuple(board[4 * (3 - c) + r] for r in range(4) for c in range(4))
    return board


def _physical_moves() -> tuple[dict[str, str], ...]:
    """For each quarter turn of the shown board, the move on the real board that each move
    on the shown board makes (found by sliding a lopsided board both ways)."""
    probe: Board = (2, 0, 0, 4, 0, 8, 0, 0, 16, 0, 0, 32, 0, 0, 64, 128)
    return tuple(
        {
            shown: next(
                real
                for real in MOVES
                if turned(slide(probe, real)[0], k) == slide(turned(probe, k), shown)[0]
            )
            for shown in MOVES
        }
        for k in range(4)
    )


PHYSICAL_MOVES = _physical_moves()
"""``PHYSICAL_MOVES[k][move]``: the real move of ``move`` on a board shown turned by ``k``."""


def heuristic(board: Board) -> float:
    """Empty cells, monotone rows and columns and a large corner tile score a position."""
    empty = board.count(0)
    logs = [math.log2(v) if v else 0.0 for v in board]
    monotone = 0.0
    for lines in (LINES["left"], LINES["up"]):
        for line in lines:
            values = [logs[i] for i in line]
            rising = sum(max(0.0, b - a) for a, b in itertools.pairwise(values))
            falling = sum(max(0.0, a - b) for a, b in itertools.pairwise(values))
            monotone -= min(rising, falling)
    corner = max(logs[0], logs[3], logs[12], logs[15]) == max(logs)
    return 2.7 * empty + monotone + 1.5 * corner


class Game2048(TurnBasedEnv):
    """Reach the ``target`` tile (easy 128, medium 256, hard 512) on a 4x4 board.

    After every move that changes the board a 2 (probability 0.9) or a 4 appears on a random
    empty cell. Reward: 1 when the target tile appears; 0 otherwise; the episode ends when no
    move changes the board or ``max_turns`` (default: twice the target's value) run out. A move
    that changes nothing, or a malformed one, costs a turn. ``shaping > 0`` adds a
    potential-based per-turn reward for raising the largest tile (in log2, from the
    episode's first to the target), which sums to ``shaping`` over any win. The oracle is a
    one-ply expectimax over the new tile with a corner-and-monotonicity heuristic; new tiles
    are chance, so ``oracle_always_wins`` is False.

    ``spin=True`` (the default) shows the board turned by a random quarter turn after every
    move, and moves name directions on the board as shown. In classic 2048 (``spin=False``)
    a fixed cycle that never looks at the board (down, left, down, right) wins 94% of easy
    and 75% of medium episodes, far above random moves (54%, 10%) and close to the oracle;
    with the spin a fixed cycle moves the real board in random directions, so it plays like
    random moves, while a player who reads the board loses nothing (the oracle wins 100% /
    97% / 65% of easy / medium / hard episodes on 60 seeds either way).
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT
    oracle_always_wins = False

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        target: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        spin: bool = True,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.spin = spin
        self.quarter_turns = 0
        """How far the shown board is turned from the real one (always 0 without spin)."""
        self.target = difficulty_preset(PRESETS, difficulty)["target"] if target is None else target
        if self.target < 8 or self.target & (self.target - 1):
            raise ValueError(f"target must be a power of two >= 8, got {self.target}")
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.max_turns = max_turns or 2 * self.target
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.board: Board = (0,) * 16
        self.score = 0
        self._start_max = 2

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self.board, self.score = (0,) * 16, 0
        self._spawn()
        self._spawn()
        self._start_max = max(self.board)
        self._turn_board()
        self.start()
        spin = (
            " After every move the board is shown turned by a random quarter turn; up, down, "
            "left and right always mean the board as you see it now."
            if self.spin
            else ""
        )
        task = (
            f"Play 2048 on a 4x4 board: each move slides every tile up, down, left or right, "
            f"and two equal tiles that meet merge into their sum. Make a {self.target} tile in "
            f"at most {self.max_turns} moves.{spin} Give one move per turn inside "
            f"\\boxed{{}}.\n{self.render_board()}"
        )
        return task, {"role": "user"}

    def _turn_board(self) -> None:
        """Pick how the board is shown next (a random quarter turn when spinning)."""
        self.quarter_turns = int(self.np_random.integers(4)) if self.spin else 0

    def _spawn(self) -> None:
        empty = [i for i, v in enumerate(self.board) if not v]
        if empty:
            cells = list(self.board)
            cells[empty[int(self.np_random.integers(len(empty)))]] = (
                2 if self.np_random.random() < 0.9 else 4
            )
            self.board = tuple(cells)

    def render_board(self) -> str:
        """The board as shown (turned when spinning) and the score."""
        shown = turned(self.board, self.quarter_turns)
        rows = [" ".join(f"{v or '.':>4}" for v in shown[4 * r : 4 * r + 4]) for r in range(4)]
        return "\n".join(rows) + f"\nscore {self.score}"

    def _potential(self) -> float:
        span = math.log2(self.target) - math.log2(self._start_max)
        return (math.log2(max(self.board)) - math.log2(self._start_max)) / span if span > 0 else 1.0

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        move = _ALIASES.get(move.lower(), move.lower()) if move else None
        before = self._potential() if self.shaping else 0.0
        if move not in MOVES:
            feedback = "I could not read a move: give up, down, left or right inside \\boxed{}."
        else:
            board, points = slide(self.board, PHYSICAL_MOVES[self.quarter_turns][move])
            if board == self.board:
                feedback = f"Moving {move} changes nothing."
            else:
                self.board, self.score = board, self.score + points
                self._spawn()
                feedback = f"Moved {move}."
        self._turn_board()
        if self.spin:
            feedback += " The board turned."
        gain = self.shaping * (self._potential() - before) if self.shaping else 0.0
        if max(self.board) >= self.target:
            return self.finish(
                f"You made {max(self.board)}!\n{self.render_board()}",
                1.0 + gain,
                True,
                score=float(self.score),
            )
        if all(slide(self.board, m)[0] == self.board for m in MOVES):
            return self.finish(
                f"No move changes the board: game over.\n{self.render_board()}",
                gain,
                False,
                score=float(self.score),
            )
        if self.turns_left() == 0:
            return self.finish(
                f"{feedback} No moves left.\n{self.render_board()}",
                gain,
                False,
                score=float(self.score),
            )
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_board()}", gain
        )

    def oracle(self) -> Policy:
        """One-ply expectimax: the move whose expected heuristic after the new tile is best."""

        def value(board: Board) -> float:
            empty = [i for i, v in enumerate(board) if not v]
            if not empty:
                return heuristic(board)
            total = 0.0
            for index in empty:
                for tile, weight in ((2, 0.9), (4, 0.1)):
                    cells = list(board)
                    cells[index] = tile
                    total += weight * heuristic(tuple(cells))
            return total / len(empty)

        def policy(observation: str) -> str:
            as_shown = PHYSICAL_MOVES[self.quarter_turns]
            options = [(m, slide(self.board, as_shown[m])[0]) for m in MOVES]
            options = [(m, b) for m, b in options if b != self.board] or options
            best = max(options, key=lambda option: value(option[1]))[0]
            return "\\boxed{" + best + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        return "\\boxed{" + MOVES[int(rng.integers(4))] + "}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_board()}"
