"""Hangman: find a word by guessing letters before the wrong guesses run out."""

from __future__ import annotations

import functools
import string
from collections import Counter
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move
from palaestra.envs.games.wordle import word_list

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"words": "common", "lives": 10},
    "medium": {"words": "common", "lives": 6},
    "hard": {"words": "all", "lives": 6},
}
SYSTEM_PROMPT = (
    "You are playing Hangman. Think step by step, then give one letter inside \\boxed{}, for "
    "example \\boxed{e}, or the whole word if you know it."
)


@functools.cache
def letter_weights(words: tuple[str, ...]) -> dict[str, float]:
    """How often each letter occurs in ``words`` (at least once, so none is impossible)."""
    counts = Counter("".join(words))
    return {ch: float(counts[ch] + 1) for ch in string.ascii_lowercase}


class Hangman(TurnBasedEnv):
    """Guess a five-letter English word (wordle's answer list; ``hard``: every accepted
    word) letter by letter, or all at once.

    A wrong letter, a wrong word or a letter guessed before costs a life; the episode ends
    when the word is complete (reward 1) or the ``lives`` run out (0). A malformed guess
    costs a turn but no life, and the turn limit (``max_turns``, default ``lives`` + 26)
    bounds the episode; every observation shows the lives and turns left.
    ``shaping > 0`` adds a potential-based per-turn reward: ``shaping`` times the change in
    the share of the word's letters revealed, which sums to ``shaping`` over any win. The
    oracle guesses the letter found in the most words that still fit what it has seen. No
    policy wins every word (``_atch`` has seven endings), so ``oracle_always_wins`` is False;
    the oracle wins about 99.6% of easy episodes, 83% of medium and 70% of hard ones.
    """

    threaded_step = False
    oracle_always_wins = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        lives: int | None = None,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.words = word_list(preset["words"])
        self.lives = preset["lives"] if lives is None else lives
        if self.lives < 1 or shaping < 0:
            raise ValueError("lives must be >= 1 and shaping >= 0")
        self.max_turns = max_turns or self.lives + 26
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.secret = ""
        self.guessed: set[str] = set()
        self.misses = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self.secret = self.words[int(self.np_random.integers(len(self.words)))]
        self.guessed, self.misses = set(), 0
        self.start()
        task = (
            f"Find my {len(self.secret)}-letter word. Guess one letter per turn (or the whole "
            f"word) inside \\boxed{{}}; you may make {self.lives} wrong guesses.\n{self.render_word()}"
        )
        return task, {"role": "user"}

    def render_word(self) -> str:
        pattern = " ".join(ch if ch in self.guessed else "_" for ch in self.secret)
        wrong = ", ".join(sorted(self.guessed - set(self.secret))) or "none"
        return (
            f"Word: {pattern}   Wrong letters: {wrong}   Lives left: {self.lives - self.misses}"
            f"   Turns left: {self.turns_left()}"
        )

    def _shown(self) -> float:
        return sum(ch in self.guessed for ch in self.secret) / len(self.secret)

    def play(self, action: str) -> StepResult:
        move = (parse_move(action) or "").strip().lower()
        before = self._shown()
        if len(move) == 1 and move in string.ascii_lowercase:
            if move in self.guessed:
                self.misses += 1
                feedback = f"You already guessed {move}: that costs a life."
            else:
                self.guessed.add(move)
                hit = move in self.secret
                self.misses += not hit
                feedback = (
                    f"Yes, {move} is in the word." if hit else f"No, {move} is not in the word."
                )
        elif len(move) == len(self.secret) and move.isascii() and move.isalpha():
            if move == self.secret:
                self.guessed |= set(self.secret)
            else:
                self.misses += 1
            feedback = (
                "That is the word." if move == self.secret else f"No, the word is not {move}."
            )
        else:
            feedback = (
                "I could not read a guess: give one letter (or the whole word) inside \\boxed{}."
            )
        gain = self.shaping * (self._shown() - before)
        if all(ch in self.guessed for ch in self.secret):
            return self.finish(f"You found it: {self.secret}.", 1.0 + gain, True)
        if self.misses >= self.lives or self.turns_left() == 0:
            return self.finish(f"{feedback} Game over; the word was {self.secret}.", gain, False)
        return self.proceed(f"{feedback}\n{self.render_word()}", gain)

    def candidates(self) -> list[str]:
        """Words that fit the revealed letters and avoid every wrong letter."""
        wrong = self.guessed - set(self.secret)
        shown = [ch if ch in self.guessed else None for ch in self.secret]
        return [
            word
            for word in self.words
            if len(word) == len(self.secret)
            and all(
                (s is None and w not in self.guessed) or w == s
                for w, s in zip(word, shown, strict=True)
            )
            and not wrong & set(word)
        ]

    def oracle(self) -> Policy:
        """The word when one candidate is left, else the letter most candidates contain."""

        def policy(observation: str) -> str:
            words = self.candidates()
            if len(words) == 1:
                return "\\boxed{" + words[0] + "}"
            counts = Counter(ch for word in words for ch in set(word) if ch not in self.guessed)
            return "\\boxed{" + max(sorted(counts), key=counts.__getitem__) + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        """A letter not guessed yet, drawn as often as it occurs in the word list (a player
        who knows which letters are common, but does not look at the word)."""
        weights = letter_weights(self.words)
        fresh = [ch for ch in string.ascii_lowercase if ch not in self.guessed] or ["e"]
        p = np.array([weights[ch] for ch in fresh])
        return "\\boxed{" + fresh[int(rng.choice(len(fresh), p=p / p.sum()))] + "}"

    def render_text(self) -> str:
        return f"turn {self.turn}/{self.max_turns}  {self.render_word()}"
