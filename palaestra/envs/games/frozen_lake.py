"""Frozen lake: walk from S to G across a frozen lake without falling into a hole (H)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"size": 4, "holes": 0.15},
    "medium": {"size": 6, "holes": 0.2},
    "hard": {"size": 8, "holes": 0.25},
}
MOVES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
_ALIASES = {"l": "left", "d": "down", "r": "right", "u": "up", "w": "up", "a": "left", "s": "down"}
_PERPENDICULAR = {
    "left": ("up", "down"),
    "right": ("up", "down"),
    "up": ("left", "right"),
    "down": ("left", "right"),
}
SYSTEM_PROMPT = (
    "You are crossing a frozen lake. Think step by step, then give one move inside \\boxed{}: "
    "left, right, up or down, for example \\boxed{right}."
)

Cell = tuple[int, int]


class FrozenLake(TurnBasedEnv):
    """A ``size`` x ``size`` lake generated from the seed, with the start (S) and the goal
    (G) at cells the seed picks, at least ``size - 1`` steps apart; a path from S to G
    always exists. (With S and G always in opposite corners, alternating down and right
    without looking won 51% of easy and 16% of medium episodes, against 6% and 0% for
    random moves.)

    Reward: 1 on reaching G; 0 on every other step, and the episode ends in a hole (H).
    With ``slippery=True`` a move goes the intended way with probability 1/3 and to either
    side with 1/3 each (gymnasium's FrozenLake), so no policy always wins; the oracle is
    then optimal for the turns left (finite-horizon value iteration). A malformed move costs
    a turn. ``shaping > 0`` adds a potential-based per-turn reward: ``shaping`` times the
    decrease of the shortest-path distance to G over the start's distance, which sums to
    ``shaping`` over any win.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        size: int | None = None,
        holes: float | None = None,
        slippery: bool = False,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.size = preset["size"] if size is None else size
        self.hole_share = preset["holes"] if holes is None else holes
        if not 2 <= self.size <= 16 or not 0 <= self.hole_share < 0.6:
            raise ValueError("size must be in 2..16 and holes in [0, 0.6)")
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.slippery = slippery
        self.max_turns = max_turns or (10 * self.size if slippery else 4 * self.size)
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.holes: frozenset[Cell] = frozenset()
        self.start_cell: Cell = (0, 0)
        self.goal: Cell = (self.size - 1, self.size - 1)
        self.position: Cell = (0, 0)
        self._distance: dict[Cell, int] = {}

    @property
    def oracle_always_wins(self) -> bool:  # type: ignore[override]
        return not self.slippery

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._draw_lake()
        self.position = self.start_cell
        self.start()
        slip = " The ice is slippery: a move may slide you to either side." if self.slippery else ""
        task = (
            f"Walk from the start S to the goal G without stepping into a hole (H), in at most "
            f"{self.max_turns} moves. P marks where you stand (on S at first); . is firm ice."
            f"{slip} Give each move inside \\boxed{{}}: left, right, up or down.\n"
            f"{self.render_grid()}"
        )
        return task, {"role": "user"}

    def _draw_lake(self) -> None:
        """Holes, start and goal from ``np_random``: redrawn until the goal is reachable and
        at least ``size - 1`` steps from the start."""
        cells = self.size * self.size
        while True:
            start, goal = (
                divmod(int(i), self.size) for i in self.np_random.choice(cells, 2, replace=False)
            )
            mask = self.np_random.random((self.size, self.size)) < self.hole_share
            mask[start] = mask[goal] = False
            self.holes = frozenset((int(r), int(c)) for r, c in zip(*np.nonzero(mask), strict=True))
            self.start_cell, self.goal = start, goal
            self._distance = self._distances_to_goal()
            if self._distance.get(start, 0) >= self.size - 1:
                return

    def _distances_to_goal(self) -> dict[Cell, int]:
        distance = {self.goal: 0}
        queue = deque([self.goal])
        while queue:
            cell = queue.popleft()
            for neighbour in self._neighbours(cell):
                if neighbour not in distance and neighbour not in self.holes:
                    distance[neighbour] = distance[cell] + 1
                    queue.append(neighbour)
        return distance

    def _neighbours(self, cell: Cell) -> list[Cell]:
        return [self._slide(cell, move) for move in MOVES if self._slide(cell, move) != cell]

    def _slide(self, cell: Cell, move: str) -> Cell:
        dr, dc = MOVES[move]
        row, col = cell[0] + dr, cell[1] + dc
        return (row, col) if 0 <= row < self.size and 0 <= col < self.size else cell

    def render_grid(self) -> str:
        rows = []
        for r in range(self.size):
            row = ""
            for c in range(self.size):
                cell = (r, c)
                row += (
                    "P"
                    if cell == self.position
                    else "H"
                    if cell in self.holes
                    else "G"
                    if cell == self.goal
                    else "S"
                    if cell == self.start_cell
                    else "."
                )
            rows.append(row)
        return "\n".join(rows)

    def _potential(self, cell: Cell) -> float:
        start = self._distance[self.start_cell]
        return -self._distance.get(cell, start) / max(start, 1)

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        move = _ALIASES.get(move.lower(), move.lower()) if move else None
        if move not in MOVES:
            feedback = "I could not read a move: give left, right, up or down inside \\boxed{}."
            gain = 0.0
        else:
            actual = move
            if self.slippery:
                actual = (move, *_PERPENDICULAR[move])[int(self.np_random.integers(3))]
            before = self.position
            self.position = self._slide(before, actual)
            if self.position in self.holes:
                return self.finish(f"You fell into a hole.\n{self.render_grid()}", 0.0, False)
            gain = self.shaping * (self._potential(self.position) - self._potential(before))
            if self.position == self.goal:
                return self.finish(
                    f"You reached the goal in {self.turn} moves.\n{self.render_grid()}",
                    1.0 + gain,
                    True,
                )
            slid = f" You slid {actual}." if actual != move else ""
            feedback = (
                f"You moved {move}.{slid}"
                if self.position != before
                else f"You stayed in place (the edge).{slid}"
            )
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.\n{self.render_grid()}", gain, False)
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_grid()}", gain
        )

    def oracle(self) -> Policy:
        """Shortest path on firm ice; when slippery, the move that maximises the chance of
        reaching G within the turns left (finite-horizon value iteration)."""
        if not self.slippery:

            def walk(observation: str) -> str:
                here = self._distance[self.position]
                best = min(
                    MOVES, key=lambda m: self._distance.get(self._slide(self.position, m), here + 1)
                )
                return "\\boxed{" + best + "}"

            return walk
        plan, _ = self.slippery_plan()

        def slide(observation: str) -> str:
            left = max(self.turns_left(), 1)
            return "\\boxed{" + plan[min(left, len(plan)) - 1][self.position] + "}"

        return slide

    def slippery_plan(self) -> tuple[list[dict[Cell, str]], float]:
        """``plan[t - 1][cell]``, the best move with ``t`` moves left, and the probability
        that following it from S reaches G within ``max_turns`` moves."""
        cells = [
            (r, c) for r in range(self.size) for c in range(self.size) if (r, c) not in self.holes
        ]
        value = {cell: float(cell == self.goal) for cell in cells}
        value.update(dict.fromkeys(self.holes, 0.0))
        plan = []
        for _ in range(self.max_turns):
            choice, new = {}, dict(value)
            for cell in cells:
                if cell == self.goal:
                    choice[cell] = "down"
                    continue
                outcomes = {
                    move: sum(value[self._slide(cell, m)] for m in (move, *_PERPENDICULAR[move]))
                    / 3
                    for move in MOVES
                }
                choice[cell] = max(outcomes, key=outcomes.__getitem__)
                new[cell] = outcomes[choice[cell]]
            plan.append(choice)
            value = new
        return plan, value[self.start_cell]

    def random_action(self, rng: np.random.Generator) -> str:
        """A random move that does not walk into a hole the map shows (any move when every
        one does)."""
        safe = [m for m in MOVES if self._slide(self.position, m) not in self.holes]
        moves = safe or list(MOVES)
        return "\\boxed{" + moves[int(rng.integers(len(moves)))] + "}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_grid()}"
