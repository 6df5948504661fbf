"""Envs hosted by Ray actors, spread over a cluster's CPUs (code, SQL and other CPU-heavy envs).

Each actor is one worker process holding its envs, exactly like a worker of the process pool
(:mod:`palaestra.runner.process`, whose worker-side functions it calls); episodes go to the
least-loaded live actor. An actor that dies (its node lost, killed, out of memory) fails the
episodes it held, which the runner marks errored; later episodes go to the actors left, and
every call has a deadline, so a run never hangs on a lost worker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import palaestra
from palaestra.core.env import ResetResult, StepResult
from palaestra.core.registry import EnvSpec
from palaestra.runner.process import (
    RemoteEnv,
    release_in_worker,
    reset_in_worker,
    step_in_worker,
)
from palaestra.runner.tasks import Task

logger = logging.getLogger(__name__)


class EnvWorker:
    """The actor class: one process hosting envs by handle number."""

    def ready(self) -> bool:
        """Answers once the actor is placed and started."""
        return True

    def reset(self, handle: int, spec: EnvSpec, kwargs: dict, seed: Any, options: Any) -> Any:
        return reset_in_worker(handle, spec, kwargs, seed, options)

    def step(self, handle: int, action: str) -> StepResult:
        return step_in_worker(handle, action)

    def release(self, handle: int, reuse: bool) -> None:
        release_in_worker(handle, reuse)


class RayEnv:
    """One env living in a Ray actor: an env handle (``areset``/``astep`` + metadata)."""

    steps_inline = False

    def __init__(self, host: RayEnvHost, worker: int, handle: int, spec: EnvSpec, kwargs: dict):
        self._host, self._worker, self._handle = host, worker, handle
        self._spec, self._kwargs = spec, kwargs
        self.system_prompt: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.tool_format = "hermes"
        self.max_turns: int | None = None

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        obs, info, meta = await self._host.call(
            self._worker, "reset", self._handle, self._spec, self._kwargs, seed, options
        )
        for name in RemoteEnv.METADATA:
            setattr(self, name, meta[name])
        return obs, info

    async def astep(self, action: str) -> StepResult:
        return await self._host.call(self._worker, "step", self._handle, action)

    def release(self, reuse: bool) -> None:
        self._host.load[self._worker] -= 1
        if self._worker not in self._host.dead:
            self._host.actors[self._worker].release.remote(self._handle, reuse)


class RayEnvHost:
    """An env host of ``workers`` Ray actors, ``num_cpus`` each, spread over the cluster.

    Needs a connected Ray (``ray.init()`` locally, ``ray.init(address="auto")`` on a cluster);
    ``timeout_s`` bounds every env call. Actors the cluster cannot place within
    ``placement_timeout_s`` are dropped with a warning (all of them: an error), so no episode
    waits on one. ``close()`` kills the actors.

    >>> ray.init(address="auto")  # doctest: +SKIP
    >>> host = RayEnvHost(workers=64)  # doctest: +SKIP
    >>> episodes = Runner(agent, host=host, concurrency=256).run(tasks)  # doctest: +SKIP
    """

    def __init__(
        self,
        workers: int,
        *,
        num_cpus: float = 1.0,
        timeout_s: float = 600.0,
        placement_timeout_s: float = 60.0,
    ):
        import ray

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if not ray.is_initialized():
            raise RuntimeError("RayEnvHost needs a running Ray: call ray.init(...) first")
        actor = ray.remote(EnvWorker).options(
            num_cpus=num_cpus, scheduling_strategy="SPREAD", max_restarts=0
        )
        self.actors = [actor.remote() for _ in range(workers)]
        self.load = [0] * workers
        self.dead: set[int] = set()
        self.timeout_s = timeout_s
        self._handles = itertools.count()
        self._place(num_cpus, placement_timeout_s)

    def _place(self, num_cpus: float, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for every actor to start; those the cluster cannot place
        by then are killed and never get an episode (a warning says so), and none placed at
        all is an error."""
        import ray

        ready = {actor.ready.remote(): worker for worker, actor in enumerate(self.actors)}
        _, waiting = ray.wait(list(ready), num_returns=len(ready), timeout=timeout_s)
        unplaced = sorted(ready[ref] for ref in waiting)
        if not unplaced:
            return
        for worker in unplaced:
            ray.kill(self.actors[worker])
            self.dead.add(worker)
        workers = len(self.actors)
        problem = (
            f"{len(unplaced)} of {workers} Ray env workers could not be placed within "
            f"{timeout_s:g} s (each asks for num_cpus={num_cpus:g}; the cluster has "
            f"{ray.cluster_resources().get('CPU', 0):g} CPUs)"
        )
        if len(unplaced) == workers:
            self.close()
            raise RuntimeError(f"{problem}: lower workers or num_cpus, or add nodes")
        logger.warning("%s; running on the %d placed", problem, workers - len(unplaced))

    async def call(self, worker: int, method: str, *args: Any) -> Any:
        """Run ``method`` on actor ``worker``; a dead or silent actor raises."""
        from ray.exceptions import RayActorError

        if worker in self.dead:
            raise RuntimeError(f"env worker {worker} died earlier in this run")
        ref = getattr(self.actors[worker], method).remote(*args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
        except RayActorError as exc:
            self.dead.add(worker)
            raise RuntimeError(f"env worker {worker} died: {exc}") from None
        except TimeoutError:
            raise TimeoutError(
                f"env worker {worker} gave no answer in {self.timeout_s:g} s"
            ) from None

    def acquire(self, task: Task) -> RayEnv:
        live = [w for w in range(len(self.actors)) if w not in self.dead]
        if not live:
            raise RuntimeError("every Ray env worker has died")
        worker = min(live, key=self.load.__getitem__)
        self.load[worker] += 1
        spec = palaestra.spec(task.env_id)
        return RayEnv(self, worker, next(self._handles), spec, dict(task.env_kwargs))

    def release(self, task: Task, handle: RayEnv, *, healthy: bool) -> None:
        handle.release(healthy)

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors.clear()
