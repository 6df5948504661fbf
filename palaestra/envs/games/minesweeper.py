"""Minesweeper: reveal every safe cell without touching a mine; the first reveal is always
safe and every board can be finished by logic alone from it."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"rows": 5, "cols": 5, "mines": 3},
    "medium": {"rows": 8, "cols": 8, "mines": 10},
    "hard": {"rows": 10, "cols": 10, "mines": 18},
}
SYSTEM_PROMPT = (
    "You are playing Minesweeper. Think step by step, then give one move inside \\boxed{}: "
    "'reveal ROW COL' or 'flag ROW COL' (1-based), for example \\boxed{reveal 3 4}."
)
_MOVE = re.compile(
    r"^\s*(reveal|open|r|flag|f|unflag|u)?\s*\(?\s*(\d{1,2})\s*[, ]\s*(\d{1,2})\s*\)?\s*$",
    re.IGNORECASE,
)
MAX_BOARD_TRIES = 200

Cell = tuple[int, int]


@functools.cache
def neighbours(cell: Cell, rows: int, cols: int) -> tuple[Cell, ...]:
    """The up to 8 cells around ``cell`` on the board (computed once per cell and size)."""
    r, c = cell
    return tuple(
        (r + dr, c + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols
    )


@functools.cache
def board_rows(rows: int, cols: int) -> tuple[tuple[Cell, ...], ...]:
    """The cells of each row, in order."""
    return tuple(tuple((r, c) for c in range(cols)) for r in range(rows))


@functools.cache
def neighbour_masks(rows: int, cols: int) -> tuple[int, ...]:
    """For each cell index ``r * cols + c``, its neighbours as a bit mask."""
    return tuple(
        sum(1 << (nr * cols + nc) for nr, nc in neighbours((r, c), rows, cols))
        for r in range(rows)
        for c in range(cols)
    )


def logic_step(
    revealed: dict[Cell, int], flagged: set[Cell], rows: int, cols: int
) -> tuple[set[Cell], set[Cell]]:
    """Cells the visible numbers prove safe, and cells they prove to be mines: single-cell
    rules plus the subset rule between pairs of numbered cells (on bit masks: this runs for
    every step of every board drawn)."""
    around = neighbour_masks(rows, cols)
    flag_mask = 0
    for r, c in flagged:
        flag_mask |= 1 << (r * cols + c)
    known = flag_mask
    for r, c in revealed:
        known |= 1 << (r * cols + c)
    constraints = []
    for (r, c), number in revealed.items():
        mask = around[r * cols + c]
        if unknown := mask & ~known:
            constraints.append((unknown, number - (mask & flag_mask).bit_count()))
    safe = mines = 0
    for unknown, count in constraints:
        if count == 0:
            safe |= unknown
        elif count == unknown.bit_count():
            mines |= unknown
    if not safe and not mines:
        for a, count_a in constraints:
            for b, count_b in constraints:
                if a & b == a and a != b:  # a is a proper subset of b
                    rest, left = b & ~a, count_b - count_a
                    if left == 0:
                        safe |= rest
                    elif left == rest.bit_count():
                        mines |= rest
    return _cells(safe, cols), _cells(mines, cols)


def _cells(mask: int, cols: int) -> set[Cell]:
    cells = set()
    while mask:
        low = mask & -mask
        index = low.bit_length() - 1
        cells.add((index // cols, index % cols))
        mask ^= low
    return cells


class Minesweeper(TurnBasedEnv):
    """A ``rows`` x ``cols`` board with ``mines`` mines, laid at the first reveal (away from
    it and its neighbours) and redrawn until logic alone can finish the board from there.

    Reward: 1 when every safe cell is revealed; 0 otherwise, and the episode ends on a mine.
    Flags are optional notes. A malformed move, or one on a revealed cell, costs a turn.
    ``shaping > 0`` adds a potential-based per-turn reward: ``shaping`` times the change in the
    share of safe cells revealed, which sums to ``shaping`` over any win. The oracle plays
    the moves the visible numbers prove (it needs no guess on these boards).
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        rows: int | None = None,
        cols: int | None = None,
        mines: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.rows = preset["rows"] if rows is None else rows
        self.cols = preset["cols"] if cols is None else cols
        self.mines = preset["mines"] if mines is None else mines
        if not (
            3 <= self.rows <= 30
            and 3 <= self.cols <= 30
            and 1 <= self.mines <= self.rows * self.cols - 9
        ):
            raise ValueError("need 3..30 rows and columns and 1 .. rows*cols-9 mines")
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.safe_cells = self.rows * self.cols - self.mines
        self.max_turns = max_turns or 2 * self.safe_cells
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.mine_cells: set[Cell] = set()
        self._mine_mask = 0  # the same cells as bits r * cols + c
        self.revealed: dict[Cell, int] = {}
        self.flagged: set[Cell] = set()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self.mine_cells, self.revealed, self.flagged = set(), {}, set()
        self._mine_mask = 0
        self.start()
        task = (
            f"Minesweeper on a {self.rows}x{self.cols} board with {self.mines} mines. Reveal every "
            f"safe cell in at most {self.max_turns} moves; a number tells how many of the 8 "
            "neighbouring cells hold mines. Your first reveal is always safe. Give one move "
            "per turn inside \\boxed{}: 'reveal ROW COL' or 'flag ROW COL', e.g. \\boxed{reveal "
            f"{(self.rows + 1) // 2} {(self.cols + 1) // 2}}}.\n{self.render_board()}"
        )
        return task, {"role": "user"}

    def _lay_mines(self, first: Cell) -> None:
        """Mines away from the first reveal, redrawn until logic finishes the board."""
        keep_clear = {first, *neighbours(first, self.rows, self.cols)}
        cells = [
            (r, c) for r in range(self.rows) for c in range(self.cols) if (r, c) not in keep_clear
        ]
        for _ in range(MAX_BOARD_TRIES):
            chosen = self.np_random.choice(len(cells), size=self.mines, replace=False)
            self.mine_cells = {cells[int(i)] for i in chosen}
            self._mine_mask = sum(1 << (r * self.cols + c) for r, c in self.mine_cells)
            if self._logic_finishes(first):
                return
        # no logic-solvable board in MAX_BOARD_TRIES draws (far denser than any preset):
        # the last draw stays, and may need a guess

    def _logic_finishes(self, first: Cell) -> bool:
        revealed: dict[Cell, int] = {}
        flagged: set[Cell] = set()
        self._flood(first, revealed)
        while len(revealed) < self.safe_cells:
            safe, mines = logic_step(revealed, flagged, self.rows, self.cols)
            if not safe and not mines:
                return False
            flagged |= mines
            for cell in safe:
                self._flood(cell, revealed)
        return True

    def _count(self, cell: Cell) -> int:
        around = neighbour_masks(self.rows, self.cols)[cell[0] * self.cols + cell[1]]
        return (around & self._mine_mask).bit_count()

    def _flood(self, cell: Cell, revealed: dict[Cell, int]) -> None:
        """Reveal ``cell``, and around every 0 its neighbours, into ``revealed``."""
        stack = [cell]
        while stack:
            current = stack.pop()
            if current in revealed:
                continue
            revealed[current] = self._count(current)
            if revealed[current] == 0:
                stack.extend(
                    n for n in neighbours(current, self.rows, self.cols) if n not in revealed
                )

    def render_board(self) -> str:
        revealed, flagged = self.revealed, self.flagged
        lines = ["    " + " ".join(f"{c + 1:>2}" for c in range(self.cols))]
        for r, row in enumerate(board_rows(self.rows, self.cols)):
            marks = [
                "012345678"[revealed[cell]] if cell in revealed else "F" if cell in flagged else "#"
                for cell in row
            ]
            lines.append(f"{r + 1:>2}   " + "  ".join(marks))
        return "\n".join(lines)

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        match = _MOVE.match(move) if move is not None else None
        before = len(self.revealed)
        if match is None:
            feedback = (
                "I could not read a move: give 'reveal ROW COL' or 'flag ROW COL' inside \\boxed{}."
            )
        else:
            kind = (match.group(1) or "reveal").lower()[0]
            cell = (int(match.group(2)) - 1, int(match.group(3)) - 1)
            if not (0 <= cell[0] < self.rows and 0 <= cell[1] < self.cols):
                feedback = f"Row {cell[0] + 1}, column {cell[1] + 1} is off the board."
            elif kind in "fu":
                feedback = self._flag(cell, kind == "f")
            elif cell in self.revealed:
                feedback = "That cell is already revealed."
            else:
                if not self.mine_cells:
                    self._lay_mines(cell)
                if cell in self.mine_cells:
                    return self.finish(
                        f"Boom! Row {cell[0] + 1}, column {cell[1] + 1} held a mine.", 0.0, False
                    )
                self.flagged.discard(cell)
                self._flood(cell, self.revealed)
                self.flagged -= set(self.revealed)
                feedback = f"Revealed {len(self.revealed) - before} cell(s)."
        gain = self.shaping * (len(self.revealed) - before) / self.safe_cells
        if len(self.revealed) == self.safe_cells:
            return self.finish(f"Cleared!\n{self.render_board()}", 1.0 + gain, True)
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.\n{self.render_board()}", gain, False)
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_board()}", gain
        )

    def _flag(self, cell: Cell, on: bool) -> str:
        if cell in self.revealed:
            return "That cell is already revealed."
        (self.flagged.add if on else self.flagged.discard)(cell)
        return f"{'Flagged' if on else 'Unflagged'} row {cell[0] + 1}, column {cell[1] + 1}."

    def oracle(self) -> Policy:
        """Reveal the centre first, then a cell the visible numbers prove safe."""

        def policy(observation: str) -> str:
            if not self.revealed:
                cell = ((self.rows - 1) // 2, (self.cols - 1) // 2)
            else:
                known_mines: set[Cell] = set()  # deduced from the numbers, not the agent's flags
                safe, mines = logic_step(self.revealed, known_mines, self.rows, self.cols)
                while not safe and mines - known_mines:
                    known_mines |= mines
                    safe, mines = logic_step(self.revealed, known_mines, self.rows, self.cols)
                cell = (
                    min(safe)
                    if safe
                    else min(
                        (r, c)
                        for r in range(self.rows)
                        for c in range(self.cols)
                        if (r, c) not in self.revealed
                    )
                )
            return f"\\boxed{{reveal {cell[0] + 1} {cell[1] + 1}}}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        return f"\\boxed{{reveal {int(rng.integers(1, self.rows + 1))} {int(rng.integers(1, self.cols + 1))}}}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_board()}"
