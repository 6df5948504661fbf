"""Gymnasium wrappers for text envs: turn limit, history formats, reward noise."""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from palaestra.core.env import ResetResult, StepResult


class TurnLimit(gym.Wrapper[str, str, str, str]):
    """Truncate an episode after ``max_turns`` steps.

    Sets ``info["truncation_reason"] = "turn_limit"`` on the step that truncates.
    """

    def __init__(self, env: gym.Env[str, str], max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        super().__init__(env)
        self.max_turns = max_turns
        self._turns = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._turns = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        if self._turns >= self.max_turns and not (terminated or truncated):
            truncated = True
            info = {**info, "truncation_reason": "turn_limit"}
        return obs, reward, terminated, truncated, info


class HistoryObservation(gym.Wrapper[str, str, str, str]):
    """Choose what each observation carries, for agents that see one message per turn.

    * ``"last"``: the env's latest observation (what the env returns; the default of envs).
    * ``"concat"``: the whole transcript so far (task, then every action and observation),
      optionally cut to the last ``max_chars`` characters.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        mode: Literal["last", "concat"] = "concat",
        *,
        include_actions: bool = True,
        max_chars: int | None = None,
    ):
        if mode not in ("last", "concat"):
            raise ValueError(f"mode must be 'last' or 'concat', got {mode!r}")
        super().__init__(env)
        self.mode = mode
        self.include_actions = include_actions
        self.max_chars = max_chars
        self._parts: list[str] = []

    def _render(self) -> str:
        text = "\n\n".join(self._parts)
        if self.max_chars is not None and len(text) > self.max_chars:
            text = text[len(text) - self.max_chars :]
        return text

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        obs, info = self.env.reset(seed=seed, options=options)
        if self.mode == "last":
            return obs, info
        self._parts = [f"Task:\n{obs}"]
        return self._render(), info

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.mode == "last":
            return obs, reward, terminated, truncated, info
        if self.include_actions:
            self._parts.append(f"Your action:\n{action}")
        self._parts.append(f"Observation:\n{obs}")
        return self._render(), reward, terminated, truncated, info


def flip_reward(reward: float, bounds: tuple[float, float]) -> float:
    """The mirror image of ``reward`` in ``bounds``: ``low + high - reward`` (1 <-> 0 for 0/1)."""
    low, high = bounds
    return low + high - reward


class RewardNoise(gym.Wrapper[str, str, str, str]):
    """Corrupt rewards for robustness studies (noisy-reward RL).

    With probability ``flip_prob`` a reward r is flipped to ``low + high - r`` (for a 0/1
    reward: 1 <-> 0); then Gaussian noise of std ``noise_std`` is added. ``only_terminal``
    corrupts only the reward of the last step. The noise has its own generator, seeded from
    the reset seed, so it never perturbs the env's randomness; ``info["clean_reward"]`` keeps
    the true value.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        flip_prob: float = 0.0,
        noise_std: float = 0.0,
        *,
        only_terminal: bool = True,
        bounds: tuple[float, float] | None = None,
    ):
        if not 0.0 <= flip_prob <= 1.0:
            raise ValueError(f"flip_prob must be in [0, 1], got {flip_prob}")
        if noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        super().__init__(env)
        self.flip_prob = flip_prob
        self.noise_std = noise_std
        self.only_terminal = only_terminal
        self.bounds = bounds or getattr(env.unwrapped, "reward_range", (0.0, 1.0))
        self._noise_rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        if seed is not None:
            self._noise_rng = np.random.default_rng([seed, 0x5EED])
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.only_terminal and not (terminated or truncated):
            return obs, reward, terminated, truncated, info
        noisy = float(reward)
        if self._noise_rng.random() < self.flip_prob:
            noisy = flip_reward(noisy, self.bounds)
        if self.noise_std:
            noisy += float(self._noise_rng.normal(0.0, self.noise_std))
        return obs, noisy, terminated, truncated, {**info, "clean_reward": reward}
