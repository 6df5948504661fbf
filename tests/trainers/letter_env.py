"""A small two-turn env for learning tests through the real runner: a turn's reward is the
fraction of the action's characters that are lowercase ASCII letters."""

from __future__ import annotations

import string
from typing import Any

from palaestra.core.env import Env, ResetResult, StepResult
from palaestra.core.registry import UnknownEnvError, register, spec

ENV_ID = "test:Lowercase-v0"
TURNS = 2


class Lowercase(Env):
    """Two turns; reward per turn = share of lowercase ASCII letters in the action (0 if empty).
    Success: both turns all lowercase."""

    max_turns = TURNS
    threaded_step = False

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self._rewards: list[float] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._rewards = []
        return "Write a few lowercase letters.", {"role": "user"}

    def step(self, action: str) -> StepResult:
        reward = sum(c in string.ascii_lowercase for c in action) / len(action) if action else 0.0
        self._rewards.append(reward)
        done = len(self._rewards) >= TURNS
        info: dict[str, Any] = {"role": "user"}
        if done:
            info["success"] = min(self._rewards) == 1.0
        return "Again.", reward, done, False, info


def register_once() -> None:
    """Register :data:`ENV_ID` unless it already is."""
    try:
        spec(ENV_ID)
    except UnknownEnvError:
        register(ENV_ID, "tests.trainers.letter_env:Lowercase")
