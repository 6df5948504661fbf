"""Sudoku: fill a 9x9 grid so every row, column and 3x3 box holds 1-9 once; every puzzle has
exactly one solution."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"clues": 44},
    "medium": {"clues": 34},
    "hard": {"clues": 26},
}
SYSTEM_PROMPT = (
    "You are solving a Sudoku. Think step by step, then give one move inside \\boxed{}: the "
    "row (1-9), the column (1-9) and the digit, for example \\boxed{3 5 7}; digit 0 erases a "
    "digit you wrote."
)
_MOVE = re.compile(r"^\s*r?\s*([1-9])\s*[, ]?\s*c?\s*([1-9])\s*[,=: ]\s*([0-9])\s*$", re.IGNORECASE)
ALL = (1 << 10) - 2  # bits 1..9
BOXES = [[3 * (r // 3) + c // 3 for c in range(9)] for r in range(9)]


def count_solutions(grid: list[int], limit: int = 2) -> int:
    """How many solutions ``grid`` (81 cells, 0 = empty) has, counting up to ``limit``
    (bitmask constraint propagation with the most-constrained cell first)."""
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    empty = []
    for index, value in enumerate(grid):
        r, c = divmod(index, 9)
        if value:
            bit = 1 << value
            if rows[r] & bit or cols[c] & bit or boxes[BOXES[r][c]] & bit:
                return 0
            rows[r] |= bit
            cols[c] |= bit
            boxes[BOXES[r][c]] |= bit
        else:
            empty.append(index)

    def search() -> int:
        best, best_options, best_count = -1, 0, 10
        for position, index in enumerate(empty):
            if index < 0:
                continue
            r, c = divmod(index, 9)
            options = ALL & ~(rows[r] | cols[c] | boxes[BOXES[r][c]])
            count = options.bit_count()
            if count < best_count:
                best, best_options, best_count = position, options, count
                if count <= 1:
                    break
        if best < 0:
            return 1
        if best_count == 0:
            return 0
        index = empty[best]
        empty[best] = -1
        r, c = divmod(index, 9)
        found = 0
        options = best_options
        while options and found < limit:
            bit = options & -options
            options ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[BOXES[r][c]] |= bit
            found += search()
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[BOXES[r][c]] ^= bit
        empty[best] = index
        return found

    return search()


def random_solution(rng: np.random.Generator) -> list[int]:
    """A complete valid grid: a shuffled base pattern (digits, rows within bands, bands,
    columns within stacks, stacks, and a transpose are all permuted)."""
    digits = [int(d) for d in rng.permutation(9) + 1]

    def lines() -> list[int]:
        bands = rng.permutation(3)
        return [int(3 * band + line) for band in bands for line in rng.permutation(3)]

    row_order, col_order = lines(), lines()
    grid = [digits[(3 * (r % 3) + r // 3 + c) % 9] for r in row_order for c in col_order]
    if rng.random() < 0.5:
        grid = [grid[9 * c + r] for r in range(9) for c in range(9)]
    return grid


def make_puzzle(rng: np.random.Generator, clues: int) -> tuple[list[int], list[int]]:
    """(puzzle, solution): clues removed in random order while the solution stays unique,
    down to ``clues`` (or as far as uniqueness allows)."""
    solution = random_solution(rng)
    puzzle = list(solution)
    filled = 81
    for index in rng.permutation(81):
        if filled <= clues:
            break
        kept = puzzle[index]
        puzzle[index] = 0
        if count_solutions(puzzle) != 1:
            puzzle[index] = kept
        else:
            filled -= 1
    return puzzle, solution


class Sudoku(TurnBasedEnv):
    """A 9x9 Sudoku with a unique solution, ``clues`` digits given (easy 44, medium 34,
    hard 26 or as few as uniqueness allows).

    A move writes a digit into an empty (or earlier filled, not given) cell, or erases one
    (digit 0); it is refused when it repeats a digit in its row, column or box. Reward: 1
    when the grid is full (then it is the solution); 0 otherwise. A malformed or refused move
    costs a turn. ``max_turns`` defaults to twice the empty cells. ``shaping > 0`` adds a potential-based per-turn
    reward: ``shaping`` times the change in the share of empty cells holding their solution
    digit, which sums to ``shaping`` over any win.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        clues: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.clues = difficulty_preset(PRESETS, difficulty)["clues"] if clues is None else clues
        if not 17 <= self.clues <= 80:
            raise ValueError(f"clues must be in 17..80, got {self.clues}")
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self._max_turns = max_turns
        self.max_turns = max_turns or 2 * (81 - self.clues)
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.grid: list[int] = [0] * 81
        self.given: list[bool] = [False] * 81
        self.solution: list[int] = [0] * 81

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        puzzle, self.solution = make_puzzle(self.np_random, self.clues)
        self.grid = list(puzzle)
        self.given = [bool(v) for v in puzzle]
        self.max_turns = self._max_turns or 2 * self.grid.count(0)
        self.start()
        task = (
            f"Solve this Sudoku in at most {self.max_turns} moves: fill the empty cells (.) so "
            "that every row, column and 3x3 box holds the digits 1-9 once. Give one move per "
            "turn inside \\boxed{}: row, column, digit, e.g. \\boxed{3 5 7}.\n" + self.render_grid()
        )
        return task, {"role": "user"}

    def render_grid(self) -> str:
        lines = ["    1 2 3   4 5 6   7 8 9"]
        for r in range(9):
            if r in (3, 6):
                lines.append("    ------+-------+------")
            cells = [str(v) if v else "." for v in self.grid[9 * r : 9 * r + 9]]
            lines.append(f"{r + 1}   " + " | ".join(" ".join(cells[i : i + 3]) for i in (0, 3, 6)))
        return "\n".join(lines)

    def _correct_share(self) -> float:
        open_cells = [i for i in range(81) if not self.given[i]]
        return sum(self.grid[i] == self.solution[i] for i in open_cells) / max(len(open_cells), 1)

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        match = _MOVE.match(move) if move is not None else None
        before = self._correct_share()
        feedback = (
            self._write(*(int(g) for g in match.groups()))
            if match
            else (
                "I could not read a move: give row, column and digit inside \\boxed{}, e.g. \\boxed{3 5 7}."
            )
        )
        gain = self.shaping * (self._correct_share() - before)
        if 0 not in self.grid:
            return self.finish(f"Solved!\n{self.render_grid()}", 1.0 + gain, True)
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.\n{self.render_grid()}", gain, False)
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_grid()}", gain
        )

    def _write(self, row: int, col: int, digit: int) -> str:
        index = 9 * (row - 1) + (col - 1)
        if self.given[index]:
            return f"Refused: row {row}, column {col} is a given digit."
        if digit == 0:
            self.grid[index] = 0
            return f"Erased row {row}, column {col}."
        for other in range(81):
            r, c = divmod(other, 9)
            same_unit = r == row - 1 or c == col - 1 or BOXES[r][c] == BOXES[row - 1][col - 1]
            if other != index and same_unit and self.grid[other] == digit:
                return f"Refused: {digit} is already in that cell's row, column or box (row {r + 1}, column {c + 1})."
        self.grid[index] = digit
        return f"Wrote {digit} at row {row}, column {col}."

    def oracle(self) -> Policy:
        """Erase a wrong digit if there is one, else write the solution digit of the first
        empty cell (solution digits never clash once no wrong digit is left)."""

        def policy(observation: str) -> str:
            wrong = [i for i in range(81) if self.grid[i] not in (0, self.solution[i])]
            index = wrong[0] if wrong else self.grid.index(0) if 0 in self.grid else 0
            row, col = divmod(index, 9)
            digit = 0 if wrong else self.solution[index]
            return f"\\boxed{{{row + 1} {col + 1} {digit}}}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        row, col, digit = (int(v) for v in rng.integers(1, 10, size=3))
        return f"\\boxed{{{row} {col} {digit}}}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_grid()}"
