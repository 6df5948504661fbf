"""Wrappers: palaestra envs that change another env (turn limit, history, reward noise, tools).

A :class:`Wrapper` is itself an :class:`~palaestra.core.env.Env`, so a wrapped env registers,
runs in the runner, evaluates and trains like any other. It forwards what describes the
env (``system_prompt``, ``tools``, ``tool_format``, ``max_turns``, ``reward_range``, ``oracle_always_wins``, the
oracle, random actions, rendering) and any other public attribute to the env it wraps.

Most wrappers change what comes back, not how the env is called: they override the hooks
:meth:`Wrapper.after_reset` and :meth:`Wrapper.after_step`, which both the sync methods and
the async twins go through. A wrapper that overrides ``step``/``reset`` itself should
override ``astep``/``areset`` too; if it does not, the async twins run its sync methods.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import numpy as np

from palaestra.core.env import Env, Policy, ResetResult, StepResult


class Wrapper(Env):
    """Base of palaestra wrappers; ``Wrapper(env)`` alone changes nothing.

    >>> env = TurnLimit(palaestra.make("game:Wordle-v0"), 3)  # doctest: +SKIP
    >>> env.system_prompt == env.unwrapped.system_prompt  # doctest: +SKIP
    True
    """

    _sync_reset_only = False
    _sync_step_only = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._sync_reset_only = cls.reset is not Wrapper.reset and cls.areset is Wrapper.areset
        cls._sync_step_only = cls.step is not Wrapper.step and cls.astep is Wrapper.astep

    def __init__(self, env: Env):
        if not isinstance(env, Env):
            raise TypeError(
                f"{type(self).__name__} wraps palaestra envs, got {type(env).__name__}; "
                "build the env with palaestra.make(...)"
            )
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":  # "env": unset during unpickling
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.env, name)

    # What describes the env: forwarded (a subclass overrides the ones it changes).
    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    @property
    def np_random(self) -> np.random.Generator:
        return self.env.np_random

    @property
    def render_mode(self) -> str | None:  # type: ignore[override]
        return self.env.render_mode

    @property
    def spec(self) -> Any:  # type: ignore[override]
        return self.__dict__.get("_spec", self.env.spec)

    @spec.setter
    def spec(self, value: Any) -> None:
        self.__dict__["_spec"] = value

    @property
    def system_prompt(self) -> str | None:  # type: ignore[override]
        return self.env.system_prompt

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.env.tools

    @property
    def tool_format(self) -> str:  # type: ignore[override]
        return self.env.tool_format

    @property
    def max_turns(self) -> int | None:  # type: ignore[override]
        return self.env.max_turns

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return self.env.reward_range

    @property
    def problem_count(self) -> int | None:  # type: ignore[override]
        return self.env.problem_count

    @property
    def oracle_always_wins(self) -> bool:  # type: ignore[override]
        return self.env.oracle_always_wins

    @property
    def steps_inline(self) -> bool:
        cls = type(self)
        return self.env.steps_inline and cls.areset is Wrapper.areset and cls.astep is Wrapper.astep

    @property
    def native_async(self) -> bool:
        cls = type(self)
        if cls.areset is not Wrapper.areset or cls.astep is not Wrapper.astep:
            return True
        # The twins await the wrapped env's, except where only the sync method is overridden.
        return self.env.native_async and not (cls._sync_reset_only and cls._sync_step_only)

    def oracle(self) -> Policy:
        return self.env.oracle()

    def random_action(self, rng: np.random.Generator) -> str:
        return self.env.random_action(rng)

    def render(self) -> str | None:
        return self.env.render()

    def render_text(self) -> str:
        return self.env.render_text()

    def close(self) -> None:
        self.env.close()

    # Hooks: what the wrapper changes.
    def after_reset(self, result: ResetResult, seed: int | None) -> ResetResult:
        """Change what ``reset`` returns (and reset the wrapper's own state)."""
        return result

    def after_step(self, action: str, result: StepResult) -> StepResult:
        """Change what ``step`` returns."""
        return result

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        return self.after_reset(self.env.reset(seed=seed, options=options), seed)

    def step(self, action: str) -> StepResult:
        return self.after_step(action, self.env.step(action))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        if self._sync_reset_only:
            return await asyncio.to_thread(self.reset, seed=seed, options=options)
        return self.after_reset(await self.env.areset(seed=seed, options=options), seed)

    async def astep(self, action: str) -> StepResult:
        if self._sync_step_only:
            return await asyncio.to_thread(self.step, action)
        return self.after_step(action, await self.env.astep(action))

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


TURN_LIMIT_REASON = "turn_limit"
"""``info["truncation_reason"]`` of a step cut by the env's ``max_turns``."""


class TurnLimit(Wrapper):
    """Truncate an episode after ``max_turns`` steps (every step counts, tool calls too).

    ``env.max_turns`` becomes the smaller of ``max_turns`` and the wrapped env's own limit.
    Sets ``info["truncation_reason"] = "turn_limit"`` on the step that truncates.
    """

    def __init__(self, env: Env, max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        super().__init__(env)
        self.turn_limit = max_turns
        self.turns = 0

    @property
    def max_turns(self) -> int:
        inner = self.env.max_turns
        return self.turn_limit if inner is None else min(inner, self.turn_limit)

    def after_reset(self, result: ResetResult, seed: int | None) -> ResetResult:
        self.turns = 0
        return result

    def after_step(self, action: str, result: StepResult) -> StepResult:
        self.turns += 1
        return truncate_at_limit(result, self.turns, self.turn_limit)


def truncate_at_limit(result: StepResult, turns: int, limit: int | None) -> StepResult:
    """``result`` truncated with reason ``"turn_limit"`` if the episode goes on past ``limit``."""
    obs, reward, terminated, truncated, info = result
    if limit is not None and turns >= limit and not (terminated or truncated):
        return obs, reward, False, True, {**info, "truncation_reason": TURN_LIMIT_REASON}
    return result


class HistoryObservation(Wrapper):
    """Choose what each observation carries, for agents that see one message per turn.

    * ``"last"``: the env's latest observation (what the env returns; the default of envs).
    * ``"concat"``: the whole transcript so far (task, then every action and observation),
      optionally cut to the last ``max_chars`` characters.
    """

    def __init__(
        self,
        env: Env,
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

    def after_reset(self, result: ResetResult, seed: int | None) -> ResetResult:
        if self.mode == "last":
            return result
        obs, info = result
        self._parts = [f"Task:\n{obs}"]
        return self._render(), info

    def after_step(self, action: str, result: StepResult) -> StepResult:
        if self.mode == "last":
            return result
        obs, reward, terminated, truncated, info = result
        if self.include_actions:
            self._parts.append(f"Your action:\n{action}")
        self._parts.append(f"Observation:\n{obs}")
        return self._render(), reward, terminated, truncated, info


def flip_reward(reward: float, bounds: tuple[float, float]) -> float:
    """The mirror image of ``reward`` in ``bounds``: ``low + high - reward`` (1 <-> 0 for 0/1)."""
    low, high = bounds
    return low + high - reward


class RewardNoise(Wrapper):
    """Corrupt rewards for robustness studies (noisy-reward RL).

    With probability ``flip_prob`` a reward r is flipped to ``low + high - r`` (for a 0/1
    reward: 1 <-> 0); then Gaussian noise of std ``noise_std`` is added. ``only_terminal``
    corrupts only the reward of the last step. The noise has its own generator, seeded from
    the reset seed, so it never perturbs the env's randomness; ``info["clean_reward"]`` keeps
    the true value. With ``noise_std > 0`` rewards may leave the env's ``reward_range``.
    """

    def __init__(
        self,
        env: Env,
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
        self.bounds = tuple(bounds) if bounds is not None else tuple(env.reward_range)
        self._noise_rng = np.random.default_rng()

    def after_reset(self, result: ResetResult, seed: int | None) -> ResetResult:
        if seed is not None:
            self._noise_rng = np.random.default_rng([seed, 0x5EED])
        return result

    def after_step(self, action: str, result: StepResult) -> StepResult:
        obs, reward, terminated, truncated, info = result
        if self.only_terminal and not (terminated or truncated):
            return result
        noisy = float(reward)
        if self._noise_rng.random() < self.flip_prob:
            noisy = flip_reward(noisy, self.bounds)
        if self.noise_std:
            noisy += float(self._noise_rng.normal(0.0, self.noise_std))
        return obs, noisy, terminated, truncated, {**info, "clean_reward": reward}
