"""Guess the number: dense per-turn feedback; binary search is the optimal policy."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"min_number": 1, "max_number": 20, "max_turns": 8},
    "medium": {"min_number": 1, "max_number": 50, "max_turns": 10},
    "hard": {"min_number": 1, "max_number": 1000, "max_turns": 12},
}

SYSTEM_PROMPT = (
    "You are playing a guessing game. Think step by step, then give your guess as an integer "
    "inside \\boxed{}, for example \\boxed{25}."
)


class GuessTheNumber(TurnBasedEnv):
    """Find a secret integer; after each guess the env says whether it is higher or lower.

    Reward: 1 for the guess that hits the secret, 0 for every other step (also for malformed
    or out-of-range guesses, which count as turns). The episode ends on the correct guess or
    after ``max_turns`` guesses. Binary search always wins, in at most
    ``ceil(log2(max - min + 2))`` guesses.

    ``shaping > 0`` adds a dense per-turn reward: ``shaping`` times the information the guess
    gained, ``log(open range before / open range after) / log(whole range)`` (the hit leaves
    one number open). It is potential-based (the potential is the log of the open range), so
    it sums to ``shaping`` over any winning episode, however many guesses it took, and never
    changes which policy is best; a guess outside the open range gains nothing.
    """

    threaded_step = False

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        min_number: int | None = None,
        max_number: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        preset = difficulty_preset(PRESETS, difficulty)
        self.min_number = preset["min_number"] if min_number is None else min_number
        self.max_number = preset["max_number"] if max_number is None else max_number
        self.max_turns = preset["max_turns"] if max_turns is None else max_turns
        if self.min_number > self.max_number:
            raise ValueError(f"min_number {self.min_number} > max_number {self.max_number}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        self._secret = self.min_number
        self._low, self._high = self.min_number, self.max_number
        self._guesses: list[int] = []

    @property
    def optimal_turns(self) -> int:
        """Worst-case number of guesses binary search needs."""
        return math.ceil(math.log2(self.max_number - self.min_number + 2))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._secret = int(self.np_random.integers(self.min_number, self.max_number + 1))
        self._low, self._high = self.min_number, self.max_number
        self._guesses = []
        self.start()
        task = (
            f"I am thinking of an integer between {self.min_number} and {self.max_number} "
            f"(inclusive). Find it in at most {self.max_turns} guesses. After each guess I will "
            "tell you whether my number is higher or lower. Give each guess inside \\boxed{}, "
            "for example \\boxed{" + str((self.min_number + self.max_number) // 2) + "}."
        )
        return task, {"role": "user"}

    def play(self, action: str) -> StepResult:
        turns_left = self.turns_left()
        gain = 0.0
        guess = _parse_int(parse_move(action))
        if guess is None:
            feedback = "I could not read a guess. Give one integer inside \\boxed{}, for example \\boxed{7}."
        elif not self.min_number <= guess <= self.max_number:
            feedback = f"{guess} is out of range: my number is between {self.min_number} and {self.max_number}."
        elif guess == self._secret:
            self._guesses.append(guess)
            gain = self._narrow_to(guess, guess)
            return self.finish(
                f"Correct! My number was {guess}. You found it in {self.turn} guesses.",
                1.0 + gain,
                True,
            )
        else:
            self._guesses.append(guess)
            if guess < self._secret:
                gain = self._narrow_to(max(self._low, guess + 1), self._high)
                feedback = f"{guess} is too low: my number is higher."
            else:
                gain = self._narrow_to(self._low, min(self._high, guess - 1))
                feedback = f"{guess} is too high: my number is lower."
        if turns_left == 0:
            return self.finish(
                f"{feedback} No guesses left; my number was {self._secret}.", gain, False
            )
        plural = "guess" if turns_left == 1 else "guesses"
        return self.proceed(f"{feedback} You have {turns_left} {plural} left.", gain)

    def _narrow_to(self, low: int, high: int) -> float:
        """Set the open range; the shaping reward for the information that gained."""
        before = self._high - self._low + 1
        self._low, self._high = low, high
        whole = self.max_number - self.min_number + 1
        if not self.shaping or whole == 1:
            return 0.0
        return self.shaping * math.log(before / (high - low + 1)) / math.log(whole)

    def oracle(self) -> Policy:
        """Binary search over the interval the feedback so far leaves open."""
        return lambda observation: "\\boxed{" + str((self._low + self._high) // 2) + "}"

    def random_action(self, rng: np.random.Generator) -> str:
        return "\\boxed{" + str(int(rng.integers(self.min_number, self.max_number + 1))) + "}"

    def render_text(self) -> str:
        guesses = ", ".join(map(str, self._guesses)) or "none"
        return f"range {self.min_number}..{self.max_number}, turn {self.turn}/{self.max_turns}, guesses: {guesses}"


_INTEGER = re.compile(r"[+-]?(?:[0-9]{1,18}|[0-9]{1,3}(?:,[0-9]{3}){1,5})")
"""One integer, commas only as thousands separators (``1,000``): ``1,2,3,4,5`` is a list
of guesses, not the number 12345, and is refused."""


def _parse_int(move: str | None) -> int | None:
    if move is None or not _INTEGER.fullmatch(text := move.strip()):
        return None
    return int(text.replace(",", ""))
