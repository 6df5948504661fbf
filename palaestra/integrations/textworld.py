"""TextWorld quests, generated on this machine, as palaestra envs (ids ``textworld:...``).

TextWorld (the ``textworld`` extra) generates text adventures from a seed and compiles
them with its bundled Inform 7 compiler; nothing is downloaded. Each id draws one game of
a pool of ``games`` (default 100) per episode, ``np_random`` picking the index; a game is
generated the first time it is needed and kept in ``cache_root()/textworld/`` (keyed by
the generator settings and TextWorld's version), so the same seed gives the same episode
and later runs start at once.

* ``textworld:Quest-v0``: a quest through rooms and objects (``tw-make custom``): Easy 3
  rooms, 3 steps, 20 turns; medium 5 rooms, 4 steps, 50 turns; Hard 10 rooms, 8 steps,
  100 turns.
* ``textworld:CoinCollector-v0``: find the coin; levels 5 / 110 / 215 (5, 10, 15 steps,
  distractor rooms from 110 on), 25 / 50 / 100 turns.
* ``textworld:TreasureHunter-v0``: find and take the named object; levels 5 / 15 / 25
  (closed, then locked doors and containers), 25 / 50 / 100 turns.
* ``textworld:Simple-v0``: a fixed house and an instruction to follow; dense / balanced /
  sparse rewards, detailed / detailed / brief goals, 50 / 50 / 100 turns.

Each has ``-Easy`` and ``-Hard`` variants (``textworld:Quest-Easy-v0``).

The first observation is the game's introduction (the objective and the first room);
then each observation is the game's answer to a command; ``env.system_prompt`` says how
to answer. A command is the content of the action's last ``\\boxed{}`` (``\\boxed{go
south}``), else the action's text, on one line, at most :data:`MAX_COMMAND_LENGTH`
characters; the interpreter's own commands (``quit``, ``restart``, ``save``,
``restore``, ``undo``...) are refused, as they would leave the episode, and its closing
offer of them is cut from the last observation. Reward: the score gained, divided by the game's maximum score,
so a win sums to 1; ``info["success"]`` is TextWorld's "won". ``info["admissible_commands"]``
lists the commands that do something in the current state. The oracle follows
TextWorld's walkthrough from the current state (``policy_commands``).

>>> env = palaestra.make("textworld:Quest-Easy-v0")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from palaestra.core.cache import cache_root
from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.registry import register
from palaestra.envs.base import EPISODE_OVER, difficulty_preset
from palaestra.verifiers.extract import last_boxed

try:
    import textworld
    import textworld.generator
    from textworld.challenges import coin_collector, simple, treasure_hunter
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise ImportError(
        "TextWorld envs need textworld: `pip install 'palaestra[textworld]'`"
    ) from exc

MAX_COMMAND_LENGTH = 150
"""Longest command sent to the game (Jericho cuts commands at 198 bytes)."""
META_COMMANDS = frozenset(
    {"quit", "q", "restart", "save", "restore", "load", "undo", "script", "unscript",
     "transcript", "verbose", "brief", "superbrief", "notify", "version", "credits"}
)  # fmt: skip
"""Interpreter commands that would leave the episode; refused."""

_INFOS = textworld.EnvInfos(
    admissible_commands=True, policy_commands=True, max_score=True, won=True, lost=True
)
_lock = threading.Lock()
"""Serialises generating and loading games (both touch process-wide warning filters)."""


def _custom_quest(settings: dict[str, Any], options: Any) -> Any:
    options.nb_rooms = settings["nb_rooms"]
    options.nb_objects = settings["nb_objects"]
    options.quest_length = settings["quest_length"]
    return textworld.generator.make_game(options)


@dataclass(frozen=True)
class Challenge:
    """How to generate one kind of game, and its settings per difficulty."""

    make: Callable[[dict[str, Any], Any], Any]
    presets: dict[str, dict[str, Any]]


CHALLENGES: dict[str, Challenge] = {
    "quest": Challenge(
        _custom_quest,
        {
            "easy": {"nb_rooms": 3, "nb_objects": 6, "quest_length": 3, "max_turns": 20},
            "medium": {"nb_rooms": 5, "nb_objects": 10, "quest_length": 4, "max_turns": 50},
            "hard": {"nb_rooms": 10, "nb_objects": 20, "quest_length": 8, "max_turns": 100},
        },
    ),
    "coin_collector": Challenge(
        coin_collector.make,
        {
            "easy": {"level": 5, "max_turns": 25},
            "medium": {"level": 110, "max_turns": 50},
            "hard": {"level": 215, "max_turns": 100},
        },
    ),
    "treasure_hunter": Challenge(
        treasure_hunter.make,
        {
            "easy": {"level": 5, "max_turns": 25},
            "medium": {"level": 15, "max_turns": 50},
            "hard": {"level": 25, "max_turns": 100},
        },
    ),
    "simple": Challenge(
        simple.make,
        {
            "easy": {"rewards": "dense", "goal": "detailed", "test": False, "max_turns": 50},
            "medium": {"rewards": "balanced", "goal": "detailed", "test": False, "max_turns": 50},
            "hard": {"rewards": "sparse", "goal": "brief", "test": False, "max_turns": 100},
        },
    ),
}


def game_file(challenge: str, settings: dict[str, Any], index: int) -> Path:
    """The compiled game ``index`` of a pool (generated and cached on first use).

    The game's seed is ``index``; the cache key covers the challenge, its settings and
    TextWorld's version. Generation writes to a temporary name and renames, so threads and
    processes that race for the same game all end up reading a whole file.
    """
    key = json.dumps(
        {"challenge": challenge, "settings": settings, "textworld": textworld.__version__},
        sort_keys=True,
    )
    folder = (
        cache_root() / "textworld" / f"{challenge}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    )
    path = folder / f"game-{index}.z8"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    with _lock:
        if not path.exists():
            _generate(challenge, settings, index, path)
    return path


def _generate(challenge: str, settings: dict[str, Any], seed: int, path: Path) -> None:
    temporary = path.with_name(f"{path.stem}.{os.getpid()}.tmp.z8")
    options = textworld.GameOptions()
    options.seeds = seed
    options.path = str(temporary)
    options.force_recompile = True
    with warnings.catch_warnings():  # grammar fallbacks, and Jericho not knowing the game
        warnings.simplefilter("ignore")
        game = CHALLENGES[challenge].make(dict(settings), options)
        textworld.generator.compile_game(game, options)
    os.replace(temporary.with_suffix(".json"), path.with_suffix(".json"))
    os.replace(temporary, path)  # last: the .z8 marks the game as complete
    temporary.with_suffix(".ni").unlink(missing_ok=True)


def _start(path: Path) -> Any:
    """Load a game. Jericho warns that it does not know TextWorld's games (score and change
    detection come from TextWorld instead); that warning is silenced here."""
    with _lock, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is not fully supported", module="jericho")
        return textworld.start(str(path), request_infos=_INFOS)


_BANNER_LINE = re.compile(r"^[\s_$|\\/<>]*$")
_BLANK_LINES = re.compile(r"\n{3,}")
_INTERPRETER_OFFER = re.compile(r"^\s*Would you like to RESTART.*$", re.M | re.I)
SYSTEM_PROMPT = (
    "You are playing a text adventure. Each message describes what you see and what your "
    "last command did. Think step by step, then give one command per turn, such as "
    "\\boxed{go north}, \\boxed{take coin} or \\boxed{open door} (a bare command on its own "
    "line works too). Reach the goal the first message sets."
)


def clean_feedback(text: str) -> str:
    """The game's text without the title banner, the ``>`` prompt, the status line and the
    interpreter's closing offer to RESTART, RESTORE or UNDO (commands the env refuses)."""
    prompt = text.rfind("\n>")
    if prompt >= 0:
        text = text[:prompt]
    text = _INTERPRETER_OFFER.sub("", text)
    lines = text.splitlines()
    while lines and _BANNER_LINE.match(lines[0]):
        lines.pop(0)
    return _BLANK_LINES.sub("\n\n", "\n".join(line.rstrip() for line in lines)).strip()


def _command(action: str) -> str:
    """The command in an action (the content of its last ``\\boxed{}``, else the action) as
    one printable ASCII line without backslashes (the interpreter reads a line that starts
    with one as its own command, and loops on an unknown one), at most
    :data:`MAX_COMMAND_LENGTH` characters."""
    boxed = last_boxed(action)
    action = boxed if boxed is not None else action
    kept = "".join(ch for ch in action if ch.isprintable() and ch.isascii() and ch != "\\")
    text = " ".join(kept.split())
    return text[:MAX_COMMAND_LENGTH]


class TextWorldEnv(Env):
    """A palaestra env over a pool of generated TextWorld games (see the module docstring).

    ``challenge`` is one of :data:`CHALLENGES`; ``difficulty`` picks its preset;
    ``settings`` override the preset's generator settings (e.g. ``nb_rooms=7``).
    """

    threaded_step = True
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        challenge: str = "quest",
        difficulty: str = "medium",
        *,
        games: int = 100,
        max_turns: int | None = None,
        **settings: Any,
    ):
        super().__init__()
        if challenge not in CHALLENGES:
            raise ValueError(f"unknown challenge {challenge!r}; choose one of {sorted(CHALLENGES)}")
        if games < 1:
            raise ValueError(f"games must be >= 1, got {games}")
        preset = dict(difficulty_preset(CHALLENGES[challenge].presets, difficulty))
        preset_turns = preset.pop("max_turns")
        self.max_turns = max_turns or preset_turns
        self.challenge, self.games = challenge, games
        self.settings = {**preset, **settings}
        self.reward_range = (-1.0, 1.0)
        self._game: Any = None
        self._path: Path | None = None
        self._state: Any = None
        self._score, self._max_score, self._turn, self._done = 0, 1, 0, True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        path = game_file(self.challenge, self.settings, int(self.np_random.integers(self.games)))
        if path != self._path:
            self.close()
            self._game, self._path = _start(path), path
        self._state = self._game.reset()
        self._score, self._turn, self._done = 0, 0, False
        self._max_score = max(1, int(self._state["max_score"] or 1))
        return clean_feedback(self._state.feedback), self._info()

    def _info(self) -> dict[str, Any]:
        return {"role": "user", "admissible_commands": list(self._state["admissible_commands"])}

    def step(self, action: str) -> StepResult:
        if self._done:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        self._turn += 1
        command = _command(action)
        if not command:
            return self._after("Give a command, such as 'look' or 'go north'.", 0.0, False)
        if command.lower().split()[0] in META_COMMANDS:
            refused = f"'{command.split()[0]}' is not available here; give a command for the game, such as 'look' or 'go north'."
            return self._after(refused, 0.0, False)
        self._state, score, done = self._game.step(command)
        reward = (score - self._score) / self._max_score
        self._score = score
        return self._after(clean_feedback(self._state.feedback) or "Nothing happens.", reward, done)

    def _after(self, observation: str, reward: float, done: bool) -> StepResult:
        info = self._info()
        truncated = not done and self._turn >= self.max_turns
        if done or truncated:
            self._done = True
            info["success"] = bool(self._state["won"])
        return observation, float(np.clip(reward, -1.0, 1.0)), bool(done), truncated, info

    def oracle(self) -> Policy:
        """TextWorld's walkthrough from the current state."""

        def policy(observation: str) -> str:
            plan = self._state["policy_commands"] if self._state is not None else None
            return plan[0] if plan else "look"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        """A random admissible command (drawn from ``rng``)."""
        commands = self._state["admissible_commands"] if self._state is not None else None
        return str(commands[int(rng.integers(len(commands)))]) if commands else "look"

    def close(self) -> None:
        if self._game is not None:
            self._game.close()
            self._game, self._path = None, None


_IDS = {
    "textworld:Quest-v0": "quest",
    "textworld:CoinCollector-v0": "coin_collector",
    "textworld:TreasureHunter-v0": "treasure_hunter",
    "textworld:Simple-v0": "simple",
}


def register_textworld_ids() -> list[str]:
    """Register the ``textworld:`` ids (each with ``-Easy``/``-Hard``); returns them.
    Called on the first ``textworld:`` lookup."""
    added = []
    for env_id, challenge in _IDS.items():
        register(
            env_id,
            TextWorldEnv,
            kwargs={"challenge": challenge},
            variants={"Easy": {"difficulty": "easy"}, "Hard": {"difficulty": "hard"}},
            override=True,
        )
        stem = env_id[: -len("-v0")]
        added += [env_id, f"{stem}-Easy-v0", f"{stem}-Hard-v0"]
    return added
