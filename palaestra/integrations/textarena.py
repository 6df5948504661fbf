"""TextArena's single-player games as palaestra envs (ids ``textarena:...``).

Every TextArena game in :data:`OFFLINE_GAMES` is a palaestra id: the TextArena id with
its variant moved before the version, ``Sudoku-v0-easy`` -> ``textarena:Sudoku-easy-v0``,
``2048-v0`` -> ``textarena:2048-v0``. The ids are registered on the first ``textarena:``
lookup (the ``textarena`` extra), so ``palaestra.make``, the runner, ``palaestra eval`` and
the trainer use them like any other env.

Only games that run offline without a key are listed (checked with textarena 0.7.4):
:data:`LEFT_OUT` says why each other single-player game is not (an OpenRouter key, nltk
corpora downloaded at first use, a syntax error).

:class:`TextArenaEnv` plays TextArena's raw env (no observation wrappers): each
observation is the game's new messages (the prompt and board at reset, then feedback,
boards and invalid-move notices), not the whole history. Actions go to the game as they
are (TextArena's games read moves in square brackets, e.g. ``[up]``, as their prompts
say). The reward is 0 until the game ends, then TextArena's reward (a win is 1; some
games give partial credit or -1); ``info["success"]`` is a reward of at least
``success_reward``. TextArena allows one invalid move in a row and ends the game on the
second. An exception inside TextArena ends the episode (reward: the low end of
``reward_range``, the error in ``info["error"]``) instead of reaching the caller.

TextArena seeds and draws from Python's *global* ``random``; each env keeps a private
copy (:mod:`palaestra.integrations._private_random`), so the same seed gives the same
episode under any concurrency and the caller's random state is left alone.

>>> env = palaestra.make("textarena:Minesweeper-small-v0")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from palaestra.core.env import Env, ResetResult, StepResult
from palaestra.core.registry import register
from palaestra.envs.base import EPISODE_OVER
from palaestra.integrations._private_random import PrivateRandom

try:
    import textarena
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise ImportError(
        "TextArena envs need textarena: `pip install 'palaestra[textarena]'`"
    ) from exc

OFFLINE_GAMES: tuple[str, ...] = (
    *(
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
    "Bandit-v0",
    "Bandit-v0-hard",
    "Blackjack-v0",
    "Blackjack-v0-long",
    "Crosswords-v0",
    "Crosswords-v0-hardcore",
    "FifteenPuzzle-v0",
    "FrozenLake-v0",
    "FrozenLake-v0-random",
    "FrozenLake-v0-hardcore",
    "GuessTheNumber-v0",
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

_DIRECTIONS = ("[up]", "[down]", "[left]", "[right]")
RANDOM_MOVES: dict[str, Callable[[Any, np.random.Generator], str]] = {
    "2048": lambda env, rng: str(rng.choice(_DIRECTIONS)),
    "FifteenPuzzle": lambda env, rng: str(rng.choice(_DIRECTIONS)),
    "FrozenLake": lambda env, rng: str(rng.choice(_DIRECTIONS)),
    "Sokoban": lambda env, rng: str(rng.choice(_DIRECTIONS)),
    "Bandit": lambda env, rng: f"[{env.buttons[int(rng.integers(len(env.buttons)))]}]",
    "Blackjack": lambda env, rng: str(rng.choice(["[hit]", "[stand]"])),
    "GuessTheNumber": lambda env, rng: f"[{int(rng.integers(env.min_number, env.max_number + 1))}]",
    "Mastermind": lambda env, rng: (
        "["
        + " ".join(
            str(int(n) + 1)
            for n in rng.choice(env.num_numbers, env.code_length, replace=env.duplicate_numbers)
        )
        + "]"
    ),
    "Minesweeper": lambda env, rng: (
        f"[{int(rng.integers(env.rows))} {int(rng.integers(env.cols))}]"
    ),
    "Secretary": lambda env, rng: str(rng.choice(["[accept]", "[continue]"])),
    "ThreeCardMonte": lambda env, rng: f"[{int(rng.integers(env.num_cups))}]",
}
"""Well-formed random moves (``random_action``) by game; other games get random text."""

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


class TextArenaEnv(Env):
    """A palaestra env over a single-player TextArena game: ``TextArenaEnv("Sudoku-v0-easy")``.

    ``max_turns`` bounds every step (invalid moves included); by default twice the game's
    own limit, or :data:`DEFAULT_MAX_TURNS` (then the episode is truncated). ``reset(seed=None)`` draws TextArena's seed from
    the env's ``np_random``, so a seeded run stays reproducible across autoresets.
    """

    threaded_step = True

    def __init__(
        self,
        ta_id: str,
        *,
        max_turns: int | None = None,
        success_reward: float = 1.0,
        reward_range: tuple[float, float] = (-1.0, 1.0),
        **kwargs: Any,
    ):
        super().__init__()
        self.ta_id = ta_id
        self._rng = PrivateRandom()
        with self._rng.active():
            self.ta_env = textarena.make(f"{ta_id}-raw", **kwargs)
        own = getattr(self.ta_env, "max_turns", None)
        default = 2 * own if isinstance(own, int) and own > 0 else DEFAULT_MAX_TURNS
        self.max_turns = max_turns or default
        self.success_reward = success_reward
        self.reward_range = reward_range
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
                done, _ = self.ta_env.step(str(action))
                observation = self._new_messages()
                outcome = self.ta_env.close() if done else None
        except Exception as exc:  # a bug inside TextArena must not end the caller's run
            self._done = True
            info = {"role": "user", "success": False, "error": repr(exc)}
            message = f"The game failed on this move and ended ({type(exc).__name__})."
            return message, self.reward_range[0], True, False, info
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
        reason = game_info.get(0, {}).get("reason") if isinstance(game_info, dict) else None
        if reason and str(reason) not in observation:
            notes.append(str(reason))
        if reward is None:  # the game handed back a message as its reward
            notes.append(str(value))
            reward = 0.0
        low, high = self.reward_range
        reward = min(high, max(low, reward))
        info = {"role": "user", "success": reward >= self.success_reward}
        return "\n".join(n for n in notes if n) or "Game over.", reward, True, False, info

    def random_action(self, rng: np.random.Generator) -> str:
        """A random well-formed move where :data:`RANDOM_MOVES` knows the game, else random
        text (drawn from ``rng``, never from the episode's state)."""
        move = RANDOM_MOVES.get(_ID.match(self.ta_id)["name"])
        return move(self.ta_env, rng) if move is not None else super().random_action(rng)


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
