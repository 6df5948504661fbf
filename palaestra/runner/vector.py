"""Gymnasium-style vector envs over text envs, for users who want the classic batched API.

Both step every sub-env once per call (lock-step) and autoreset in the same step, as
gymnasium 1.x's ``AutoresetMode.SAME_STEP``: when a sub-env ends, its observation slot holds
the next episode's task and ``infos["final_obs"][i]`` / ``infos["final_info"]`` keep the
episode that ended. Infos follow gymnasium: a dict of arrays, each key with a ``_key`` mask
of the sub-envs that reported it, so gymnasium's vector wrappers (``RecordEpisodeStatistics``)
work. Observations are a list (text does not batch into arrays); rewards and flags are numpy
arrays. :class:`palaestra.runner.Runner` is the faster path for collecting
episodes: it has no lock-step barrier.

>>> vec = SyncVectorEnv.from_id("game:GuessTheNumber-v0", num_envs=4)  # doctest: +SKIP
>>> observations, infos = vec.reset(seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import palaestra
from palaestra.core.env import Env, ResetResult, StepResult

VectorReset = tuple[list[str], dict[str, Any]]
VectorStep = tuple[list[str], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


class _TextVectorEnv(gym.vector.VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, env_fns: Sequence[Callable[[], Env]]):
        if not env_fns:
            raise ValueError("a vector env needs at least one env_fn")
        self.envs: list[Env] = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = self.single_observation_space
        self.action_space = self.single_action_space

    @classmethod
    def from_id(cls, env_id: str, num_envs: int, **kwargs: Any):
        """``num_envs`` copies of a registered env."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        return cls([lambda: palaestra.make(env_id, **kwargs) for _ in range(num_envs)])

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [seed + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
        return seeds

    def _check_actions(self, actions: Sequence[str]) -> None:
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")

    def _gather_resets(self, results: Sequence[ResetResult]) -> VectorReset:
        infos: dict[str, Any] = {}
        for i, (_, info) in enumerate(results):
            infos = self._add_info(infos, info, i)
        return [obs for obs, _ in results], infos

    def _gather_steps(
        self, results: Sequence[StepResult], resets: dict[int, ResetResult]
    ) -> VectorStep:
        observations: list[str] = []
        infos: dict[str, Any] = {}
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, (obs, reward, term, trunc, info) in enumerate(results):
            rewards[i], terminated[i], truncated[i] = reward, term, trunc
            if i in resets:
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, info = resets[i]
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return observations, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


class SyncVectorEnv(_TextVectorEnv):
    """Steps its envs one after another in the calling thread."""

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> VectorReset:
        results = [
            env.reset(seed=s, options=options)
            for env, s in zip(self.envs, self._seeds(seed), strict=True)
        ]
        return self._gather_resets(results)

    def step(self, actions: Sequence[str]) -> VectorStep:
        self._check_actions(actions)
        results = [env.step(a) for env, a in zip(self.envs, actions, strict=True)]
        resets = {
            i: self.envs[i].reset() for i, result in enumerate(results) if result[2] or result[3]
        }
        return self._gather_steps(results, resets)


class AsyncVectorEnv(_TextVectorEnv):
    """Steps its envs concurrently through their async twins (``areset``/``astep``).

    I/O-bound envs overlap their waits; threaded envs run in worker threads. ``step`` and
    ``reset`` block; inside a running event loop use ``await vec.astep(...)``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Env]]):
        super().__init__(env_fns)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def areset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> VectorReset:
        results = await asyncio.gather(
            *(
                env.areset(seed=s, options=options)
                for env, s in zip(self.envs, self._seeds(seed), strict=True)
            )
        )
        return self._gather_resets(results)

    async def astep(self, actions: Sequence[str]) -> VectorStep:
        self._check_actions(actions)
        results = await asyncio.gather(
            *(env.astep(a) for env, a in zip(self.envs, actions, strict=True))
        )
        ended = [i for i, result in enumerate(results) if result[2] or result[3]]
        reset_results = await asyncio.gather(*(self.envs[i].areset() for i in ended))
        return self._gather_steps(results, dict(zip(ended, reset_results, strict=True)))

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> VectorReset:
        return self._run(self.areset(seed=seed, options=options))

    def step(self, actions: Sequence[str]) -> VectorStep:
        return self._run(self.astep(actions))

    def _run(self, coroutine: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coroutine.close()
            raise RuntimeError(
                "AsyncVectorEnv.step/reset block and cannot run inside an event loop; "
                "use `await vec.astep(...)` / `await vec.areset(...)` there"
            )
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coroutine)

    def close_extras(self, **kwargs: Any) -> None:
        super().close_extras(**kwargs)
        if self._loop is not None:
            self._loop.close()
            self._loop = None
