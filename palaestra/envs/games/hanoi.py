"""Tower of Hanoi: move the stack to another peg, one disk at a time, never a larger disk on
top of a smaller one."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move

PEGS = "ABC"
_PEG_INDEX = {peg: index for index, peg in enumerate(PEGS)}
PRESETS: dict[str, dict[str, int]] = {
    "easy": {"disks": 3},
    "medium": {"disks": 4},
    "hard": {"disks": 5},
}
SYSTEM_PROMPT = (
    "You are solving the Tower of Hanoi. Think step by step, then give one move inside "
    "\\boxed{}, as the peg to take the top disk from and the peg to put it on, for example "
    "\\boxed{A C}."
)
_MOVE = re.compile(r"^\s*([ABC])\s*(?:,|->|to|\s)\s*([ABC])\s*$", re.IGNORECASE)

Pegs = tuple[tuple[int, ...], ...]
"""Disks on each peg, bottom first (disk 1 is the smallest)."""


def next_optimal_move(pegs: Pegs, disks: int, target: int = 2) -> tuple[int, int] | None:
    """The first move of a shortest solution from any legal position (None when solved):
    the largest disk not yet on its goal peg goes there once every smaller disk is on the
    third peg, so the smaller ones are first sent there, recursively."""
    where = {disk: index for index, peg in enumerate(pegs) for disk in peg}

    def first_move(largest: int, goal: int) -> tuple[int, int] | None:
        if largest == 0:
            return None
        if where[largest] == goal:
            return first_move(largest - 1, goal)
        spare = 3 - where[largest] - goal
        return first_move(largest - 1, spare) or (where[largest], goal)

    return first_move(disks, target)


class TowerOfHanoi(TurnBasedEnv):
    """Move the stack from its peg to the target peg (one disk per turn, never onto a smaller
    disk); the seed picks both pegs.

    Reward: 1 when the last disk lands and the stack is complete on the target; 0 otherwise. A
    malformed or illegal move costs a turn and is explained. ``max_turns`` defaults to twice
    the optimal ``2**disks - 1`` moves. ``shaping > 0`` adds a potential-based per-turn reward:
    ``shaping`` times the change in the share of disks already stacked in their final place
    on the target (from the largest up), so it sums to ``shaping`` over any win.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        disks: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.disks = difficulty_preset(PRESETS, difficulty)["disks"] if disks is None else disks
        if not 1 <= self.disks <= 12:
            raise ValueError(f"disks must be in 1..12, got {self.disks}")
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.optimal_moves = 2**self.disks - 1
        self.max_turns = 2 * self.optimal_moves if max_turns is None else max_turns
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.pegs: list[list[int]] = [[], [], []]
        self.target = 2

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        source = int(self.np_random.integers(3))
        self.target = (source + 1 + int(self.np_random.integers(2))) % 3
        self.pegs = [[], [], []]
        self.pegs[source] = list(range(self.disks, 0, -1))
        self.start()
        task = (
            f"Tower of Hanoi with {self.disks} disks (1 is the smallest). Move the whole stack "
            f"from peg {PEGS[source]} to peg {PEGS[self.target]} in at most {self.max_turns} "
            f"moves (the best solution takes "
            f"{self.optimal_moves}). Move one top disk per turn, never onto a smaller disk. "
            "Give each move inside \\boxed{}, e.g. \\boxed{A C}.\n" + self.render_pegs()
        )
        return task, {"role": "user"}

    def render_pegs(self) -> str:
        a, b, c = (" ".join(map(str, peg)) or "-" for peg in self.pegs)
        return f"A: {a}\nB: {b}\nC: {c}"

    def _placed(self) -> int:
        """Disks stacked in their final place on C, from the largest up."""
        count = 0
        for expected, disk in zip(range(self.disks, 0, -1), self.pegs[self.target], strict=False):
            if disk != expected:
                break
            count += 1
        return count

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        match = _MOVE.match(move) if move is not None else None
        before = self._placed() if self.shaping else 0
        if match is None:
            feedback = (
                "I could not read a move. Give the two pegs inside \\boxed{}, e.g. \\boxed{A C}."
            )
        else:
            source, target = match.groups()
            feedback = self._move(_PEG_INDEX[source.upper()], _PEG_INDEX[target.upper()])
        gain = self.shaping * (self._placed() - before) / self.disks if self.shaping else 0.0
        if len(self.pegs[self.target]) == self.disks:
            return self.finish(
                f"Solved in {self.turn} moves (best: {self.optimal_moves}).\n{self.render_pegs()}",
                1.0 + gain,
                True,
                optimal_moves=float(self.optimal_moves),
            )
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.\n{self.render_pegs()}", gain, False)
        return self.proceed(
            f"{feedback} {left(self.turns_left(), 'move')}\n{self.render_pegs()}", gain
        )

    def _move(self, source: int, target: int) -> str:
        if source == target:
            return f"Illegal: the disk would stay on peg {PEGS[source]}."
        if not self.pegs[source]:
            return f"Illegal: peg {PEGS[source]} is empty."
        disk = self.pegs[source][-1]
        if self.pegs[target] and self.pegs[target][-1] < disk:
            return f"Illegal: disk {disk} cannot go on the smaller disk {self.pegs[target][-1]}."
        self.pegs[target].append(self.pegs[source].pop())
        return f"Moved disk {disk} from {PEGS[source]} to {PEGS[target]}."

    def oracle(self) -> Policy:
        """The next move of a shortest solution from the current position."""

        def policy(observation: str) -> str:
            move = next_optimal_move(tuple(map(tuple, self.pegs)), self.disks, self.target)
            return "\\boxed{A C}" if move is None else f"\\boxed{{{PEGS[move[0]]} {PEGS[move[1]]}}}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        source, target = rng.choice(3, size=2, replace=False)
        return f"\\boxed{{{PEGS[source]} {PEGS[target]}}}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}\n{self.render_pegs()}"
