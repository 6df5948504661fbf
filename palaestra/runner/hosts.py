"""Where the runner's envs live: the env-handle protocol and the in-process host.

The runner plays an :class:`EnvHandle`: async ``areset``/``astep`` plus the env's metadata.
A palaestra :class:`~palaestra.core.env.Env` is one (and may also be stepped inline, without
a coroutine, when ``steps_inline`` says so); so is a
:class:`~palaestra.runner.process.RemoteEnv` in a worker process, a
:class:`~palaestra.runner.network.NetworkEnv` on an env server and a
:class:`~palaestra.runner.ray_host.RayEnv` in a Ray actor. An :class:`EnvHost` hands out
handles for tasks and takes them back; a new host plugs into the runner by implementing these
two protocols.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol, runtime_checkable

import palaestra
from palaestra.core.env import Env, ResetResult, StepResult
from palaestra.runner.tasks import Task


@runtime_checkable
class EnvHandle(Protocol):
    """One env as the runner sees it. Metadata is valid after ``areset``.

    A handle may also have ``aplay(policy, rng_seed) -> (action, step result)``: the host
    steps with the action ``policy`` (``"oracle"``, ``"random"``) picks from the env's own
    state, for agents that read it (:class:`~palaestra.runner.network.NetworkEnv` does).
    """

    system_prompt: str | None
    tools: list[dict[str, Any]]
    tool_format: str
    max_turns: int | None
    steps_inline: bool
    """True only for in-process envs whose sync ``reset``/``step`` may be called directly."""

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult: ...

    async def astep(self, action: str) -> StepResult: ...


class EnvHost(Protocol):
    """Hands out env handles for tasks and takes them back."""

    def acquire(self, task: Task) -> EnvHandle:
        """A handle ready to be reset for ``task``."""
        ...

    def release(self, task: Task, handle: EnvHandle, *, healthy: bool) -> None:
        """Take back the handle of ``task``; ``healthy=False`` (the episode failed) drops it."""
        ...

    def close(self) -> None: ...


class LocalEnvHost:
    """Envs in this process, built with :func:`palaestra.make` and reused by later tasks of
    the same env id and kwargs after a clean episode."""

    def __init__(self) -> None:
        self._free: dict[tuple, list[Env]] = defaultdict(list)

    def acquire(self, task: Task) -> Env:
        free = self._free[task.env_key]
        return free.pop() if free else palaestra.make(task.env_id, **task.env_kwargs)

    def release(self, task: Task, handle: EnvHandle, *, healthy: bool) -> None:
        if healthy:
            self._free[task.env_key].append(handle)  # type: ignore[arg-type]

    def steps_inline(self, task: Task) -> bool:
        """Whether envs of ``task`` step inline (builds one and keeps it for reuse)."""
        env = self.acquire(task)
        self._free[task.env_key].append(env)
        return env.steps_inline

    def close(self) -> None:
        for envs in self._free.values():
            for env in envs:
                env.close()
        self._free.clear()
