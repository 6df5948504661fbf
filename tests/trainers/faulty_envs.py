"""Envs that misbehave on purpose, for the trainer's robustness tests: a non-finite reward on
even seeds, a crash on every fourth reset, one on every reset, and a Ctrl-C at seed 1."""

from __future__ import annotations

import _thread
import itertools
import math
from typing import Any

from palaestra.core.registry import UnknownEnvError, register, spec
from tests.trainers.letter_env import Lowercase

NAN_REWARD_ID = "test:NaNRewardOnEvenSeeds-v0"
CRASHING_ID = "test:CrashEveryFourthReset-v0"
ALWAYS_CRASHING_ID = "test:CrashOnEveryReset-v0"
INTERRUPTING_ID = "test:CtrlCAtSeedOne-v0"


class NaNRewardOnEvenSeeds(Lowercase):
    """The lowercase env, whose first reward is NaN when the seed is even."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._even = seed is not None and seed % 2 == 0
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        observation, reward, terminated, truncated, info = super().step(action)
        if self._even and len(self._rewards) == 1:
            reward = math.nan
        return observation, reward, terminated, truncated, info


class CrashEveryFourthReset(Lowercase):
    """The lowercase env, whose every fourth reset (counted over all instances) raises."""

    resets = itertools.count()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if next(CrashEveryFourthReset.resets) % 4 == 1:
            raise RuntimeError("the env broke")
        return super().reset(seed=seed, options=options)


class CrashOnEveryReset(Lowercase):
    """The lowercase env, whose every reset raises."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        raise RuntimeError("the env broke")


class CtrlCAtSeedOne(Lowercase):
    """The lowercase env; the first reset with seed 1 in this process presses Ctrl-C (SIGINT
    to the main thread), later ones do not (a resumed run plays seed 1 again)."""

    pressed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed == 1 and not CtrlCAtSeedOne.pressed:
            CtrlCAtSeedOne.pressed = True
            _thread.interrupt_main()
        return super().reset(seed=seed, options=options)


def register_faulty_envs() -> None:
    """Register both ids unless they already are."""
    for env_id, env_class in (
        (NAN_REWARD_ID, NaNRewardOnEvenSeeds),
        (CRASHING_ID, CrashEveryFourthReset),
        (ALWAYS_CRASHING_ID, CrashOnEveryReset),
        (INTERRUPTING_ID, CtrlCAtSeedOne),
    ):
        try:
            spec(env_id)
        except UnknownEnvError:
            register(env_id, env_class)
