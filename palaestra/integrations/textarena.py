"""TextArena's single-player games as palaestra envs (ids ``textarena:...``).

Every TextArena game in :data:`OFFLINE_GAMES` is a palaestra id: the TextArena id with
its variant moved before the version, ``Sudoku-v0-easy`` -> ``textarena:Sudoku-easy-v0``.
The ids are registered on the first ``textarena:`` lookup (the ``textarena`` extra), so
``palaestra.make``, the runner, ``palaestra eval`` and the trainer use them like any other
env.

Only games that run offline without a key, and where no strategy that ignores the game
beats random play, are listed (checked with textarena 0.7.4): :data:`LEFT_OUT` says why
each other single-player game is not (an OpenRouter key, nltk corpora downloaded at first
use, a syntax error, a broken reward, a blind strategy that wins).

:class:`TextArenaEnv` plays TextArena's raw env (no observation wrappers): each
observation is the game's new messages (the prompt and board at reset, then feedback,
boards and invalid-move notices), not the whole history; ``env.system_prompt`` says how
to answer. A move is the content of the action's last ``\\boxed{}`` (in square brackets,
``\\boxed{up}`` -> ``[up]``), else the action as it is (TextArena's games read moves in
square brackets, e.g. ``[up]``, as their prompts say). The reward is 0 until the game
ends, then 1 for a win (TextArena's reward of at least ``success_reward``, also
``info["success"]``) and 0 otherwise. TextArena's partial credit for progress is paid
only with ``partial_credit=True`` (clipped to [0, 1], and never for a game that ends on
invalid moves): it paid blind play (counting up from 1 in GuessTheNumber beat random
guesses on the closeness of the last one; two garbage moves ended RushHour with 0.25).
TextArena allows one invalid move in a row and ends the game on the second. An exception
inside TextArena ends the episode (reward 0, the error in ``info["error"]``) instead of
reaching the caller. ``random_action`` is a well-formed move of the game (a legal one where
TextArena counts a blocked move as invalid); ``oracle()`` reads the game's state and wins
(:data:`~palaestra.integrations.textarena_games.ORACLES`; Slitherlink's loop is recorded
when the game draws it, as the game keeps only the clues).

TextArena seeds and draws from Python's *global* ``random``; each env keeps a private
copy (:mod:`palaestra.integrations._private_random`), so the same seed gives the same
episode under any concurrency and the caller's random state is left alone.

>>> env = palaestra.make("textarena:Minesweeper-small-v0")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import numbers
import re
import sys
from typing import Any

import numpy as np

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.registry import register
from palaestra.envs.base import EPISODE_OVER
from palaestra.integrations._private_random import PrivateRandom
from palaestra.integrations.textarena_games import ORACLES, PREPARE, RANDOM_MOVES
from palaestra.verifiers.extract import last_boxed

try:
    import textarena
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise ImportError(
        "TextArena envs need textarena: `pip install 'palaestra[textarena]'`"
    ) from exc

logger = logging.getLogger(__name__)

OFFLINE_GAMES: tuple[str, ...] = (
    "Crosswords-v0",
    "Crosswords-v0-hardcore",
    "GuessTheNumber-v0-hardcore",
    "LightsOut-v0",
    "LogicPuzzle-v0",
    "LogicPuzzle-v0-hard",
    "Mastermind-v0",
    "Mastermind-v0-hard",
    "Mastermind-v0-extreme",
    "Minesweeper-v0",
    "Minesweeper-v0-small",
    "Minesweeper-v0-medium",
    "Minesweeper-v0-hard",
    "RushHour-v0",
    "Secretary-v0",
    "Secretary-v0-long",
    "Set-v0",
    "Slitherlink-v0",
    "Sokoban-v0",
    "Sudoku-v0-very-easy",
    "Sudoku-v0-easy",
    "Sudoku-v0",
    "Sudoku-v0-medium",
    "Sudoku-v0-hard",
    "ThreeCardMonte-v0",
)
"""TextArena ids (single-player) that run offline, without keys."""

_NLTK = "loads nltk's word corpus, which it downloads from the network at first use"
_CORNER_2048 = (
    "a fixed corner cycle (down, left, down, right) that never reads the board beats random "
    "moves, as in classic 2048 (palaestra's game:2048 spins its board against that)"
)
_FIXED_CORNERS = (
    "start and goal sit in opposite corners, so alternating down and right without looking "
    "won 60% against random moves' 11% (with -random, whose corners vary, a fixed cycle "
    "still wins whenever it points the right way; palaestra's game:FrozenLake draws start "
    "and goal anywhere)"
)
_OPENROUTER = "its game master is a model behind OpenRouter (needs OPENROUTER_API_KEY)"
LEFT_OUT: dict[str, str] = {
    "GuessWho-v0": _OPENROUTER,
    "TwentyQuestions-v0": _OPENROUTER,
    "TwentyQuestions-v0-hardcore": _OPENROUTER,
    "Hangman-v0": _NLTK,
    "Hangman-v0-hardcore": _NLTK,
    "Wordle-v0": _NLTK,
    "Wordle-v0-hardcore": _NLTK,
    "Wordle-v0-long": _NLTK,
    "Wordle-v0-long-hardcore": _NLTK,
    "WordLadder-v0": _NLTK,
    "WordLadder-v0-medium": _NLTK,
    "WordLadder-v0-hard": _NLTK,
    "WordSearch-v0": _NLTK,
    "WordSearch-v0-hardcore": _NLTK,
    "Klondike-v0": "its module does not import (a syntax error in textarena 0.7.4)",
    "Bandit-v0": "its final reward is the regret of the button chosen (the worse the button, "
    "the more it pays), and the best button is never recognised (textarena 0.7.4 compares "
    "the button with a dict)",
    "Bandit-v0-hard": "as Bandit-v0",
    "Blackjack-v0": "always standing, without looking at the cards, wins 38% of hands "
    "against random play's 28%",
    "Blackjack-v0-long": "as Blackjack-v0",
    "GuessTheNumber-v0": "10 guesses for 20 numbers: guessing without reading the feedback "
    "wins half the episodes (GuessTheNumber-v0-hardcore: 10 for 50)",
    "FifteenPuzzle-v0": "tiles are shuffled without checking parity, so half the puzzles "
    "cannot be solved, and the rest rarely within its 50 moves",
    "FrozenLake-v0": _FIXED_CORNERS,
    "FrozenLake-v0-hardcore": _FIXED_CORNERS,
    "FrozenLake-v0-random": _FIXED_CORNERS,
    **dict.fromkeys(
        (
            f"2048-v0{suffix}"
            for suffix in (
                "-ultra-easy",
                "-mega-easy",
                "-super-easy",
                "-very-easy",
                "-easy",
                "",
                "-hard",
                "-very-hard",
                "-extreme",
                "-3x3",
                "-5x5",
                "-6x6",
                "-8x8",
                "-10x10",
            )
        ),
        _CORNER_2048,
    ),
    "Sokoban-v0-medium": "generating one level can take minutes",
    **dict.fromkeys(
        (
            "Countdown-v0",
            "Cryptarithm-v0",
            "PegJump-v0",
            *(f"TowerOfHanoi-v0{s}" for s in ("", "-medium", "-hard", "-hardcore", "-extreme")),
        ),
        "the same puzzle for every seed",
    ),
}
"""Single-player TextArena games not exposed, and why (palaestra's own ``game:`` family
has offline Hangman, Wordle, WordLadder, Sokoban and TwentyQuestions)."""

DEFAULT_MAX_TURNS = 500
"""Turn budget of a game that sets none (a game's own limit is doubled, since TextArena
does not count invalid moves); ``max_turns=`` sets another (2048 to the 2048 tile takes
about 1000 moves)."""

_ID = re.compile(r"^(?P<name>.+)-v(?P<version>\d+)(?:-(?P<variant>.+))?$")


def textarena_id_to_palaestra(ta_id: str) -> str:
    """``Sudoku-v0-easy`` -> ``textarena:Sudoku-easy-v0``; ``2048-v0`` -> ``textarena:2048-v0``."""
    match = _ID.match(ta_id)
    if match is None:
        raise ValueError(f"{ta_id!r} is not a TextArena id (they look like 'Sudoku-v0-easy')")
    variant = f"-{match['variant']}" if match["variant"] else ""
    return f"textarena:{match['name']}{variant}-v{match['version']}"


def _reward(value: Any) -> float | None:
    """TextArena's reward as a float (None when it is not a finite number: a few games
    hand back their message instead)."""
    if isinstance(value, numbers.Real) and math.isfinite(float(value)):
        return float(value)
    return None


SYSTEM_PROMPT = (
    "You are playing {game}, a single-player game from TextArena. The first message gives "
    "the rules and the board. Think step by step, then give one move per turn in the form "
    "the rules ask for, e.g. [up], or inside \\boxed{{}}, e.g. \\boxed{{up}}. Two invalid "
    "moves in a row end the game with nothing."
)


def ta_move(action: str) -> str:
    r"""The move to hand TextArena: the content of the last ``\boxed{}`` (put in square
    brackets unless it already has them), else the action as it is.

    >>> ta_move(r"I go \boxed{up}"), ta_move(r"\boxed{[A+]}"), ta_move("[3 5 7]")
    ('[up]', '[A+]', '[3 5 7]')
    """
    boxed = last_boxed(action)
    if boxed is None:
        return action
    move = boxed.strip()
    return move if move.startswith("[") else f"[{move}]"


class TextArenaEnv(Env):
    """A palaestra env over a single-player TextArena game: ``TextArenaEnv("Sudoku-v0-easy")``.

    ``max_turns`` bounds every step (invalid moves included); by default twice the game's
    own limit, or :data:`DEFAULT_MAX_TURNS` (then the episode is truncated).
    ``reset(seed=None)`` draws TextArena's seed from the env's ``np_random``, so a seeded run
    stays reproducible across autoresets. A win pays 1, anything else 0 (TextArena's
    partial credit only with ``partial_credit=True``); what the games print goes to this
    module's logger, not to stdout.
    """

    threaded_step = True

    def __init__(
        self,
        ta_id: str,
        *,
        max_turns: int | None = None,
        success_reward: float = 1.0,
        partial_credit: bool = False,
        **kwargs: Any,
    ):
        super().__init__()
        self.ta_id = ta_id
        self.game = _ID.match(ta_id)["name"]
        self._rng = PrivateRandom()
        with self._rng.active():
            self.ta_env = textarena.make(f"{ta_id}-raw", **kwargs)
        _silence_prints(self.ta_env)
        if self.game in PREPARE:
            PREPARE[self.game](self.ta_env)
        own = getattr(self.ta_env, "max_turns", None)
        default = 2 * own if isinstance(own, int) and own > 0 else DEFAULT_MAX_TURNS
        self.max_turns = max_turns or default
        self.success_reward = success_reward
        self.partial_credit = partial_credit
        self.reward_range = (0.0, 1.0)
        self.system_prompt = SYSTEM_PROMPT.format(game=self.game)
        self._turn = 0
        self._done = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        ta_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else seed
        with self._rng.active():
            self.ta_env.reset(num_players=1, seed=ta_seed)
            observation = self._new_messages()
        self._turn, self._done = 0, False
        return observation, {"role": "user"}

    def _new_messages(self) -> str:
        _, messages = self.ta_env.get_observation()
        return "\n".join(
            str(text).strip()
            for _, text, kind in messages
            if kind != textarena.ObservationType.PLAYER_ACTION
        ).strip()

    def step(self, action: str) -> StepResult:
        if self._done:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        self._turn += 1
        try:
            with self._rng.active():
                done, _ = self.ta_env.step(ta_move(str(action)))
                observation = self._new_messages()
                outcome = self.ta_env.close() if done else None
        except Exception as exc:  # a bug inside TextArena must not end the caller's run
            self._done = True
            info = {"role": "user", "success": False, "error": repr(exc)}
            message = f"The game failed on this move and ended ({type(exc).__name__})."
            return message, 0.0, True, False, info
        if outcome is not None:
            return self._finish(observation, *outcome)
        if self._turn >= self.max_turns:
            self._done = True
            info = {"role": "user", "success": False}
            return f"{observation}\nTurn limit reached.", 0.0, False, True, info
        return observation or "(no message)", 0.0, False, False, {"role": "user"}

    def _finish(self, observation: str, rewards: Any, game_info: Any) -> StepResult:
        self._done = True
        value = rewards.get(0) if isinstance(rewards, dict) else None
        reward = _reward(value)
        notes = [observation]
        player = game_info.get(0, {}) if isinstance(game_info, dict) else {}
        reason = player.get("reason")
        if reason and str(reason) not in observation:
            notes.append(str(reason))
        if reward is None:  # the game handed back a message as its reward
            notes.append(str(value))
            reward = 0.0
        success = reward >= self.success_reward
        if player.get("invalid_move"):  # never a reward for ending on invalid moves
            reward = 0.0
        elif not self.partial_credit:
            reward = float(success)
        info = {"role": "user", "success": success}
        reward = min(1.0, max(0.0, reward))
        return "\n".join(n for n in notes if n) or "Game over.", reward, True, False, info

    def oracle(self) -> Policy:
        """A winning policy (:data:`~palaestra.integrations.textarena_games.ORACLES`); it
        reads the game's state, as palaestra's own oracles do."""
        move = ORACLES.get(self.game)
        if move is None:
            raise NotImplementedError(f"no oracle for TextArena's {self.game}")
        return lambda observation: move(self.ta_env)

    def random_action(self, rng: np.random.Generator) -> str:
        """A random well-formed move (drawn from ``rng``, never from the episode's state)."""
        move = RANDOM_MOVES.get(self.game)
        return move(self.ta_env, rng) if move is not None else super().random_action(rng)


def _silence_prints(ta_env: Any) -> None:
    """Send the ``print`` calls of the game's module (RushHour prints "Generated puzzle in N
    attempts" on every reset) to this module's logger instead of stdout."""
    module = sys.modules.get(type(ta_env).__module__)
    if module is not None and getattr(module, "print", None) is not _log_print:
        module.print = _log_print


def _log_print(*values: object, **_: Any) -> None:
    logger.debug("textarena: %s", " ".join(map(str, values)))


def register_textarena_ids() -> list[str]:
    """Register every game of :data:`OFFLINE_GAMES` (see the module docstring); returns
    the palaestra ids. Called on the first ``textarena:`` lookup."""
    added = []
    for ta_id in OFFLINE_GAMES:
        env_id = textarena_id_to_palaestra(ta_id)
        register(
            env_id,
            TextArenaEnv,
            kwargs={"ta_id": ta_id},
            description=f"TextArena's {ta_id} (textarena), played through palaestra",
            override=True,
        )
        added.append(env_id)
    return added
