"""Helpers shared by the text games."""

from __future__ import annotations

from palaestra.core.env import Env, StepResult
from palaestra.verifiers.extract import last_boxed

MAX_BARE_MOVE_LENGTH = 32
DIFFICULTIES = ("easy", "medium", "hard")


def parse_move(action: str) -> str | None:
    r"""The move in an action: the last ``\boxed{...}``, else the whole action if it is short.

    The bare form lets a person type ``25`` in ``palaestra play``; models are asked for
    ``\boxed{25}``. Returns None when no move can be read.
    """
    boxed = last_boxed(action)
    if boxed is not None:
        return boxed.strip()
    bare = action.strip()
    if 0 < len(bare) <= MAX_BARE_MOVE_LENGTH:
        return bare
    return None


def difficulty_preset(presets: dict[str, dict], difficulty: str) -> dict:
    """The preset for ``difficulty``, with an error that lists the valid names."""
    try:
        return presets[difficulty]
    except KeyError:
        raise ValueError(
            f"unknown difficulty {difficulty!r}; choose one of {sorted(presets)}"
        ) from None


class TextGame(Env):
    """Base of the turn-based games: counts turns, ends the game, answers steps after the end.

    Subclasses call :meth:`start` from ``reset`` and implement :meth:`play`, one turn whose
    ``self.turn`` is already counted; they end the game through :meth:`finish`.
    """

    threaded_step = False

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.turn = 0
        self.done = False

    def start(self) -> None:
        """Reset the turn count (call from ``reset``)."""
        self.turn = 0
        self.done = False

    def step(self, action: str) -> StepResult:
        if self.done:
            return "The game is over. Reset to play again.", 0.0, True, False, {"role": "user"}
        self.turn += 1
        return self.play(action)

    def play(self, action: str) -> StepResult:
        """Play one turn."""
        raise NotImplementedError

    def turns_left(self) -> int:
        return (self.max_turns or 0) - self.turn

    def proceed(self, observation: str) -> StepResult:
        """A non-final step: reward 0."""
        return observation, 0.0, False, False, {"role": "user"}

    def finish(
        self, observation: str, reward: float, success: bool, **metrics: float
    ) -> StepResult:
        """End the game with ``reward``; ``info`` carries success and the turn count."""
        self.done = True
        info = {
            "role": "user",
            "success": success,
            "metrics": {"turns": float(self.turn), **metrics},
        }
        return observation, reward, True, False, info
