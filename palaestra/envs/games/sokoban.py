"""Sokoban: push every box onto a target; levels are generated and proved solvable."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"size": 5, "boxes": 1, "walls": 2, "pulls": 40, "min_moves": 5},
    "medium": {"size": 5, "boxes": 2, "walls": 2, "pulls": 60, "min_moves": 10},
    "hard": {"size": 6, "boxes": 2, "walls": 4, "pulls": 200, "min_moves": 16},
}
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", "w": "up", "s": "down", "a": "left"}
SYSTEM_PROMPT = (
    "You are playing Sokoban. Think step by step, then give one move inside \\boxed{}: up, "
    "down, left or right, for example \\boxed{left}. Walking into a box pushes it."
)

Cell = tuple[int, int]
State = tuple[Cell, tuple[Cell, ...]]
"""The player's cell and the sorted box cells."""


class Level:
    """Walls and targets of a level, and the moves between states (pushes included)."""

    def __init__(self, size: int, walls: frozenset[Cell], targets: frozenset[Cell]) -> None:
        self.size, self.walls, self.targets = size, walls, targets

    def free(self, cell: Cell) -> bool:
        r, c = cell
        return 0 < r <= self.size and 0 < c <= self.size and cell not in self.walls

    def move(self, state: State, direction: str) -> State | None:
        """The state after walking ``direction`` (pushing a box ahead), or None if blocked."""
        (r, c), boxes = state
        dr, dc = MOVES[direction]
        ahead = (r + dr, c + dc)
        if not self.free(ahead):
            return None
        if ahead in boxes:
            beyond = (ahead[0] + dr, ahead[1] + dc)
            if not self.free(beyond) or beyond in boxes:
                return None
            boxes = tuple(sorted(beyond if b == ahead else b for b in boxes))
        return ahead, boxes

    def solved(self, state: State) -> bool:
        return set(state[1]) == self.targets

    def shortest_solution(self, state: State, limit: int = 200_000) -> list[str] | None:
        """A shortest move sequence that solves ``state`` (BFS), or None if there is none
        within ``limit`` visited states.

        The search runs on integers: a cell is its index in the room with its walls
        (``(size + 2)`` squared cells), a state is the bitmask of the boxes shifted left by
        8 bits, plus the player's cell, so visiting a state costs a few integer operations.
        """
        width = self.size + 2
        index = {(r, c): r * width + c for r in range(width) for c in range(width)}
        steps = [dr * width + dc for dr, dc in MOVES.values()]
        free = [self.free(divmod(i, width)) for i in range(width * width)]
        goal = sum(1 << index[t] for t in self.targets)
        player, boxes = state
        start = sum(1 << index[b] for b in boxes) << 8 | index[player]
        previous: dict[int, tuple[int, int] | None] = {start: None}
        queue = deque([start])
        while queue:
            current = queue.popleft()
            mask, at = current >> 8, current & 0xFF
            if mask == goal:
                return self._path(previous, current)
            for direction, step in enumerate(steps):
                ahead = at + step
                if not free[ahead]:
                    continue
                moved = mask
                if mask >> ahead & 1:
                    beyond = ahead + step
                    if not free[beyond] or mask >> beyond & 1:
                        continue
                    moved = mask ^ (1 << ahead) ^ (1 << beyond)
                following = moved << 8 | ahead
                if following not in previous:
                    previous[following] = (current, direction)
                    if len(previous) > limit:
                        return None
                    queue.append(following)
        return None

    @staticmethod
    def _path(previous: dict[int, tuple[int, int] | None], state: int) -> list[str]:
        names = list(MOVES)
        path = []
        while (link := previous[state]) is not None:
            state, direction = link
            path.append(names[direction])
        return path[::-1]


class Sokoban(TurnBasedEnv):
    """Push ``boxes`` boxes onto the targets of a ``size`` x ``size`` room (walls around).

    Levels are made by playing backwards from the solved position (the player pulls boxes
    off their targets; next to a box it steps away from it half the time, so boxes travel),
    so each is solvable; a BFS solver then finds the shortest solution,
    whose length is recorded as ``optimal_moves`` (levels shorter than the preset's
    ``min_moves`` are redrawn: easy 5, medium 10, hard 16).
    Reward: 1 when every box is on a target; 0 otherwise. A move into a wall, or a push
    against a wall or a second box, leaves the position unchanged and costs a turn, as does a
    malformed move. ``max_turns`` defaults to twice the optimal moves plus 10. ``shaping > 0``
    adds a potential-based per-turn reward: ``shaping`` times the change in the share of boxes
    on targets, which sums to ``shaping`` over any win. The oracle follows a shortest
    solution from the current position.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.preset = difficulty_preset(PRESETS, difficulty)
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self._max_turns = max_turns
        self.max_turns = max_turns or 60
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.level = Level(self.preset["size"], frozenset(), frozenset())
        self.state: State = ((1, 1), ())
        self.optimal_moves = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        while True:
            level, state = self._generate()
            if any(box in level.targets for box in state[1]):
                continue  # every box starts off target (so shaping sums to its weight)
            solution = level.shortest_solution(state)
            if solution and len(solution) >= self.preset["min_moves"]:
                break  # solvable within the search limit, and not too short
        self.level, self.state, self.optimal_moves = level, state, len(solution)
        self.max_turns = self._max_turns or 2 * self.optimal_moves + 10
        self.start()
        task = (
            f"Push every box (B) onto a target (T) in at most {self.max_turns} moves (the best "
            f"solution takes {self.optimal_moves}). You are P; # is a wall; * is a box on a "
            "target, + is you on a target. Give one move per turn inside \\boxed{}: up, down, "
            f"left or right.\n{self.render_room()}"
        )
        return task, {"role": "user"}

    def _generate(self) -> tuple[Level, State]:
        size, rng = self.preset["size"], self.np_random
        cells = [(r, c) for r in range(1, size + 1) for c in range(1, size + 1)]
        walls = frozenset(
            cells[int(i)] for i in rng.choice(len(cells), size=self.preset["walls"], replace=False)
        )
        floor = [cell for cell in cells if cell not in walls]
        chosen = rng.choice(len(floor), size=self.preset["boxes"] + 1, replace=False)
        targets = frozenset(floor[int(i)] for i in chosen[:-1])
        level = Level(size, walls, targets)
        player, boxes = floor[int(chosen[-1])], set(targets)
        directions = list(MOVES.values())
        for _ in range(self.preset["pulls"]):  # walk backwards, pulling the box behind
            pulls = [(dr, dc) for dr, dc in directions if (player[0] - dr, player[1] - dc) in boxes]
            if pulls and rng.random() < 0.5:  # next to a box: half the time, pull it
                dr, dc = pulls[int(rng.integers(len(pulls)))]
            else:
                dr, dc = directions[int(rng.integers(4))]
            ahead = (player[0] + dr, player[1] + dc)
            if not level.free(ahead) or ahead in boxes:
                continue
            behind = (player[0] - dr, player[1] - dc)
            if behind in boxes and rng.random() < 0.8:
                boxes.remove(behind)
                boxes.add(player)
            player = ahead
        return level, (player, tuple(sorted(boxes)))

    def render_room(self) -> str:
        size, (player, boxes) = self.level.size, self.state
        rows = []
        for r in range(size + 2):
            row = ""
            for c in range(size + 2):
                cell = (r, c)
                if not self.level.free(cell):
                    row += "#"
                elif cell in boxes:
                    row += "*" if cell in self.level.targets else "B"
                elif cell == player:
                    row += "+" if cell in self.level.targets else "P"
                else:
                    row += "T" if cell in self.level.targets else "."
            rows.append(row)
        return "\n".join(rows)

    def _on_target(self) -> float:
        return sum(b in self.level.targets for b in self.state[1]) / len(self.state[1])

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        move = _ALIASES.get(move.lower(), move.lower()) if move else None
        before = self._on_target()
        if move not in MOVES:
            feedback = "I could not read a move: give up, down, left or right inside \\boxed{}."
        else:
            following = self.level.move(self.state, move)
            if following is None:
                feedback = f"Blocked: you cannot move {move}."
            else:
                pushed = following[1] != self.state[1]
                self.state = following
                feedback = f"You moved {move}{' and pushed a box' if pushed else ''}."
        gain = self.shaping * (self._on_target() - before)
        if self.level.solved(self.state):
            return self.finish(
                f"Every box is on a target!\n{self.render_room()}",
                1.0 + gain,
                True,
                optimal_moves=float(self.optimal_moves),
            )
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.\n{self.render_room()}", gain, False)
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_room()}", gain
        )

    def oracle(self) -> Policy:
        """The next move of a shortest solution from the current position (searched again
        only when the position is not where the last plan said it would be)."""
        plan: list[str] = []
        expected: list[State | None] = [None]

        def policy(observation: str) -> str:
            if self.state != expected[0] or not plan:
                plan[:] = self.level.shortest_solution(self.state) or ["up"]
            move = plan.pop(0)
            expected[0] = self.level.move(self.state, move)
            return "\\boxed{" + move + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        return "\\boxed{" + list(MOVES)[int(rng.integers(4))] + "}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_room()}"
