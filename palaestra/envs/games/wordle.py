"""Wordle: find a five-letter word from letter-by-letter feedback."""

from __future__ import annotations

import functools
from collections import Counter
from importlib import resources
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move

WORD_LENGTH = 5
OPENER = "raise"

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"answers": "common", "max_turns": 8},
    "medium": {"answers": "common", "max_turns": 6},
    "hard": {"answers": "all", "max_turns": 6},
}

SYSTEM_PROMPT = (
    "You are playing Wordle. Think step by step, then give your guess, a five-letter English "
    "word, inside \\boxed{}, for example \\boxed{crane}."
)

LEGEND = "G = right letter, right spot; Y = in the word, wrong spot; X = not in the word (beyond the copies already marked)."


@functools.cache
def word_list(name: str) -> tuple[str, ...]:
    """A shipped word list: ``"common"`` (answer pool) or ``"all"`` (every accepted guess)."""
    filename = {"common": "wordle_answers.txt", "all": "wordle_guesses.txt"}[name]
    text = resources.files("palaestra.envs.games").joinpath("data", filename).read_text("utf-8")
    return tuple(line for line in text.splitlines() if line and not line.startswith("#"))


@functools.cache
def _accepted_words() -> frozenset[str]:
    return frozenset(word_list("all"))


def feedback(guess: str, secret: str) -> str:
    """Per-letter marks, e.g. ``feedback("crane", "cacao") == "GXYXX"``; repeated letters
    are marked yellow only as often as the secret still has unmatched copies."""
    marks = ["X"] * len(guess)
    unmatched: Counter[str] = Counter()
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = "G"
        else:
            unmatched[s] += 1
    for i, g in enumerate(guess):
        if marks[i] == "X" and unmatched[g] > 0:
            marks[i] = "Y"
            unmatched[g] -= 1
    return "".join(marks)


class Wordle(TurnBasedEnv):
    """Find a secret five-letter word; each guess is answered with per-letter marks.

    Reward: 1 when the word is found, 0 for every other step. Guesses must be English words
    from the shipped list; malformed or unknown words are refused but count as turns. The
    episode ends on the right word or after ``max_turns`` turns. Difficulty picks the answer
    pool (common words, or every accepted word) and the number of turns.
    """

    threaded_step = False

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_turns: int | None = None,
        answers: str | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.max_turns = preset["max_turns"] if max_turns is None else max_turns
        self.answer_pool = preset["answers"] if answers is None else answers
        if self.answer_pool not in ("common", "all"):
            raise ValueError(f"answers must be 'common' or 'all', got {self.answer_pool!r}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        self._secret = ""
        self._history: list[tuple[str, str]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        answers = word_list(self.answer_pool)
        self._secret = answers[int(self.np_random.integers(len(answers)))]
        self._history = []
        self.start()
        task = (
            f"Let's play Wordle. Find my secret {WORD_LENGTH}-letter English word in at most "
            f"{self.max_turns} guesses. After each guess I mark every letter: {LEGEND} "
            "Give each guess inside \\boxed{}, for example \\boxed{crane}."
        )
        return task, {"role": "user"}

    def play(self, action: str) -> StepResult:
        move = parse_move(action)
        guess = move.lower() if move is not None else None
        if guess is None or len(guess) != WORD_LENGTH or not (guess.isascii() and guess.isalpha()):
            result = f"Guesses must be one {WORD_LENGTH}-letter word inside \\boxed{{}}, for example \\boxed{{crane}}."
        elif guess not in _accepted_words():
            result = f"{guess.upper()} is not in my word list. Try another word."
        else:
            marks = feedback(guess, self._secret)
            self._history.append((guess, marks))
            if guess == self._secret:
                solved = (
                    f"{_spaced(guess.upper())}\n{_spaced(marks)}\nSolved in {self.turn} guesses!"
                )
                return self.finish(solved, 1.0, True)
            result = f"{_spaced(guess.upper())}\n{_spaced(marks)}"
        if self.turns_left() == 0:
            return self.finish(
                f"{result}\nNo guesses left. The word was {self._secret.upper()}.", 0.0, False
            )
        return self.proceed(f"{result}\nGuesses left: {self.turns_left()}.")

    def oracle(self) -> Policy:
        """A feedback-driven solver: opens with RAISE, then plays the candidate (a word still
        consistent with every mark) that splits the remaining candidates into the most groups.
        On the last turn it plays the secret, which it rarely needs (see the tests)."""

        def policy(observation: str) -> str:
            if self.turns_left() == 1:
                return "\\boxed{" + self._secret + "}"
            return "\\boxed{" + solver_guess(tuple(self._history), self.answer_pool) + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        answers = word_list(self.answer_pool)
        return "\\boxed{" + answers[int(rng.integers(len(answers)))] + "}"

    def render_text(self) -> str:
        rows = [f"{_spaced(g.upper())}  {_spaced(m)}" for g, m in self._history]
        return "\n".join(rows) or "(no guesses yet)"


@functools.lru_cache(maxsize=4096)
def solver_guess(history: tuple[tuple[str, str], ...], pool: str = "common") -> str:
    """The solver's next guess given the ``(guess, marks)`` pairs so far (cached: the solver
    is deterministic, and most games share their first turns)."""
    if not history:
        return OPENER
    candidates = [w for w in word_list(pool) if all(feedback(g, w) == m for g, m in history)]
    if len(candidates) <= 2:
        return candidates[0] if candidates else OPENER
    return max(
        candidates, key=lambda guess: len({feedback(guess, secret) for secret in candidates})
    )


def _spaced(text: str) -> str:
    return " ".join(text)
