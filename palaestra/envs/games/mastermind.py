"""Mastermind: find a secret code of colours from black/white peg feedback."""

from __future__ import annotations

import functools
import itertools
import math
import operator
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"length": 3, "colors": 4, "max_turns": 8},
    "medium": {"length": 4, "colors": 6, "max_turns": 10},
    "hard": {"length": 5, "colors": 8, "max_turns": 12},
}
SYSTEM_PROMPT = (
    "You are playing Mastermind. Think step by step, then give your guess inside \\boxed{}: "
    "one digit per position, for example \\boxed{1234}."
)

Code = tuple[int, ...]


def score(guess: Code, secret: Code) -> tuple[int, int]:
    """(black, white): right colour in the right place, right colour in the wrong place."""
    black = sum(map(operator.eq, guess, secret))
    common = 0
    for colour in set(guess):  # a plain loop: this runs on every step
        in_guess, in_secret = guess.count(colour), secret.count(colour)
        common += in_guess if in_guess < in_secret else in_secret
    return black, common - black


@functools.cache
def code_table(length: int, colors: int) -> tuple[np.ndarray, np.ndarray]:
    """Every code as a row of digits, and how often each colour occurs in it."""
    codes = np.array(list(itertools.product(range(1, colors + 1), repeat=length)), dtype=np.int8)
    counts = np.stack([(codes == c).sum(axis=1) for c in range(colors + 1)], axis=1)
    return codes, counts


def consistent_with(
    candidates: np.ndarray, guess: Code, pegs: tuple[int, int], length: int, colors: int
) -> np.ndarray:
    """The candidate code indices that would have answered ``guess`` with ``pegs``."""
    codes, counts = code_table(length, colors)
    rows = codes[candidates]
    black = (rows == np.array(guess, dtype=np.int8)).sum(axis=1)
    guess_counts = np.bincount(np.array(guess), minlength=colors + 1)
    common = np.minimum(counts[candidates], guess_counts).sum(axis=1)
    return candidates[(black == pegs[0]) & (common - black == pegs[1])]


class Mastermind(TurnBasedEnv):
    """Guess a code of ``length`` digits, each a colour 1..``colors`` (repeats allowed).

    After each guess the env answers with black pegs (right colour, right place) and white
    pegs (right colour, wrong place). Reward: 1 for the guess that equals the code, else 0;
    a malformed guess costs a turn. ``shaping > 0`` adds a potential-based per-turn reward:
    ``shaping`` times the information a guess gained, ``log(codes consistent before / after)
    / log(all codes)``, which sums to ``shaping`` over any win. The oracle plays the first
    code consistent with all feedback so far (it wins every preset within its turn limit).
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        length: int | None = None,
        colors: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.length = preset["length"] if length is None else length
        self.colors = preset["colors"] if colors is None else colors
        self.max_turns = preset["max_turns"] if max_turns is None else max_turns
        if not 1 <= self.length <= 6 or not 2 <= self.colors <= 9:
            raise ValueError("length must be in 1..6 and colors in 2..9")
        if self.max_turns < 1 or shaping < 0:
            raise ValueError("max_turns must be >= 1 and shaping >= 0")
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self._secret: Code = ()
        self._history: list[tuple[Code, tuple[int, int]]] = []
        self._candidates: np.ndarray | None = None  # consistent codes, narrowed on demand
        self._applied = 0  # history entries the candidates reflect

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._secret = tuple(
            int(c) for c in self.np_random.integers(1, self.colors + 1, size=self.length)
        )
        self._history = []
        self._candidates, self._applied = None, 0
        self.start()
        example = "".join(str(1 + i % self.colors) for i in range(self.length))
        task = (
            f"I picked a secret code of {self.length} digits, each from 1 to {self.colors} "
            f"(digits may repeat). Find it in at most {self.max_turns} guesses. After each "
            "guess I say how many digits are right and in the right place (black) and how "
            "many are right but in the wrong place (white). Give each guess inside \\boxed{}, "
            f"for example \\boxed{{{example}}}."
        )
        return task, {"role": "user"}

    def _read(self, action: str) -> Code | None:
        move = parse_move(action)
        if move is None:
            return None
        digits = move.replace(" ", "").replace(",", "")
        if len(digits) != self.length or not digits.isascii() or not digits.isdigit():
            return None
        code = tuple(map(int, digits))
        return code if 0 not in code and max(code) <= self.colors else None

    def play(self, action: str) -> StepResult:
        guess = self._read(action)
        if guess is None:
            feedback = (
                f"I could not read a guess: give {self.length} digits from 1 to {self.colors} "
                "inside \\boxed{}."
            )
            gain = 0.0
        else:
            pegs = score(guess, self._secret)
            self._history.append((guess, pegs))
            gain = self._gain()
            if pegs[0] == self.length:
                return self.finish(
                    f"Correct! The code was {self._code_text(guess)}, found in {self.turn} guesses.",
                    1.0 + gain,
                    True,
                )
            feedback = f"{self._code_text(guess)}: {pegs[0]} black, {pegs[1]} white."
        if self.turns_left() == 0:
            return self.finish(
                f"{feedback} No guesses left; the code was {self._code_text(self._secret)}.",
                gain,
                False,
            )
        plural = "guess" if self.turns_left() == 1 else "guesses"
        return self.proceed(f"{feedback} {self.turns_left()} {plural} left.", gain)

    def consistent_codes(self) -> np.ndarray:
        """Indices (into :func:`code_table`) of the codes consistent with every answer."""
        if self._candidates is None:
            self._candidates = np.arange(self.colors**self.length)
        for guess, pegs in self._history[self._applied :]:
            self._candidates = consistent_with(
                self._candidates, guess, pegs, self.length, self.colors
            )
        self._applied = len(self._history)
        return self._candidates

    def _gain(self) -> float:
        """The shaping reward of the latest answer (0 without shaping: nothing computed)."""
        if not self.shaping:
            return 0.0
        # called on every answered guess, so the candidates reflect all answers but this one
        before = len(self._candidates) if self._candidates is not None else self.colors**self.length
        after = len(self.consistent_codes())
        return self.shaping * math.log(before / after) / math.log(self.colors**self.length)

    @staticmethod
    def _code_text(code: Code) -> str:
        return "".join(map(str, code))

    def oracle(self) -> Policy:
        """The first code consistent with every answer so far."""

        def policy(observation: str) -> str:
            codes, _ = code_table(self.length, self.colors)
            return "\\boxed{" + self._code_text(tuple(codes[self.consistent_codes()[0]])) + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        return (
            "\\boxed{"
            + "".join(str(int(c)) for c in rng.integers(1, self.colors + 1, size=self.length))
            + "}"
        )

    def render_text(self) -> str:
        lines = [f"{self._code_text(g)}  {b} black {w} white" for g, (b, w) in self._history]
        return "\n".join([f"turn {self.turn}/{self.max_turns}", *lines])
