"""Envs hosted in worker processes, for CPU-heavy envs that would stall the event loop.

Each worker is a one-process executor holding its envs in a dict, so every call of an
episode reaches the process that holds its env. The worker-side functions
(:func:`reset_in_worker`, :func:`step_in_worker`, :func:`release_in_worker`) serve any
one-process worker: Ray actors (:mod:`palaestra.runner.ray_host`) call them too. Episodes
are spread over the workers least-loaded first. Workers rebuild an env from its registered
spec, wrapper stack included. A worker process that dies fails the envs it held
(:class:`WorkerDied`) and is replaced by a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import palaestra
from palaestra.core.env import ResetResult, StepResult
from palaestra.core.registry import EnvSpec, UnknownEnvError
from palaestra.runner.tasks import Task

_worker_envs: dict[int, Any] = {}
_worker_free: dict[tuple, list[Any]] = {}
_worker_keys: dict[int, tuple] = {}
MAX_IDLE_ENVS = 16
"""Released envs a worker keeps per env id and kwargs for reuse; the rest are closed."""


def reset_in_worker(
    handle: int,
    spec: EnvSpec,
    kwargs: dict[str, Any],
    seed: int | None,
    options: dict[str, Any] | None,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    env = _worker_envs.get(handle)
    if env is None:
        key = (spec.id, tuple(sorted(kwargs.items())))
        free = _worker_free.setdefault(key, [])
        env = free.pop() if free else _make_in_worker(spec, kwargs)
        _worker_envs[handle] = env
        _worker_keys[handle] = key
    obs, info = env.reset(seed=seed, options=options)
    return obs, info, {name: getattr(env, name) for name in RemoteEnv.METADATA}


def _make_in_worker(spec: EnvSpec, kwargs: dict[str, Any]) -> Any:
    """Build the env, first registering its id if this worker does not know it.

    Workers start fresh, so ids registered at run time in the parent (not by a package or
    plugin) are registered again here from the parent's spec.
    """
    import palaestra

    try:
        palaestra.spec(spec.id)
    except UnknownEnvError:
        palaestra.register(
            spec.id,
            spec.entry_point,
            kwargs=dict(spec.kwargs),
            description=spec.description,
            wrappers=spec.wrappers,
        )
    return palaestra.make(spec.id, **kwargs)


def step_in_worker(handle: int, action: str) -> StepResult:
    return _worker_envs[handle].step(action)


def release_in_worker(handle: int, reuse: bool) -> None:
    """Keep the env for the next episode of its kind, up to :data:`MAX_IDLE_ENVS` of them;
    close it otherwise (and always after a crash, ``reuse=False``), so a worker's memory
    falls back once a burst of episodes is over."""
    env = _worker_envs.pop(handle, None)
    key = _worker_keys.pop(handle, None)
    if env is None:
        return
    free = _worker_free.setdefault(key, []) if key is not None else None
    if reuse and free is not None and len(free) < MAX_IDLE_ENVS:
        free.append(env)
        return
    with contextlib.suppress(Exception):  # a broken env must not fail the release
        env.close()


class WorkerDied(RuntimeError):
    """The worker process holding an env died (killed, out of memory): its envs are lost."""


class RemoteEnv:
    """One env living in a worker process: an env handle (``areset``/``astep`` + metadata)."""

    METADATA = ("system_prompt", "tools", "tool_format", "max_turns")
    steps_inline = False

    def __init__(
        self, pool: ProcessEnvPool, worker: Worker, handle: int, spec: EnvSpec, kwargs: dict
    ):
        self._pool, self._worker, self._handle = pool, worker, handle
        self._spec, self._kwargs = spec, kwargs
        self.system_prompt: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.tool_format = "hermes"
        self.max_turns: int | None = None

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        obs, info, meta = await self._pool.call(
            self._worker, reset_in_worker, self._handle, self._spec, self._kwargs, seed, options
        )
        for name, value in meta.items():
            setattr(self, name, value)
        return obs, info

    async def astep(self, action: str) -> StepResult:
        return await self._pool.call(self._worker, step_in_worker, self._handle, action)

    def release(self, reuse: bool) -> None:
        """Hand the env back to its worker (``reuse=False`` drops it, e.g. after a crash).

        Queued on the worker without waiting: its calls run in order, so the env is back
        before the worker serves another call. Never raises (a dead worker's envs are gone).
        """
        self._worker.load -= 1
        self._pool.submit(self._worker, release_in_worker, self._handle, reuse)


class Worker:
    """One worker process (a one-process executor) and the envs handed out on it."""

    def __init__(self, number: int, context: Any):
        self.number = number
        self.executor = ProcessPoolExecutor(max_workers=1, mp_context=context)
        self.load = 0
        self.dead = False


class ProcessEnvPool:
    """An env host: ``workers`` processes that host envs; use as an async context manager or
    call ``close``.

    A worker process that dies fails the calls of the envs it held (:class:`WorkerDied`, so
    their episodes are marked errored) and is replaced by a fresh process for later episodes.
    """

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._context = multiprocessing.get_context("spawn")
        self.workers = [Worker(number, self._context) for number in range(workers)]
        self._handles = itertools.count()
        self.replaced = 0
        """How many dead worker processes were replaced."""

    async def call(self, worker: Worker, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on ``worker``; raises :class:`WorkerDied` if it died, now or
        since the env was handed out."""
        if worker.dead:
            raise WorkerDied(f"env worker process {worker.number} died earlier; its envs are lost")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(worker.executor, fn, *args)
        except BrokenProcessPool:
            self._replace(worker)
            raise WorkerDied(
                f"env worker process {worker.number} died (killed or out of memory); its envs "
                "are lost and a new process serves later episodes"
            ) from None

    def submit(self, worker: Worker, fn: Any, *args: Any) -> None:
        """Queue a call on ``worker`` without waiting for it (nothing if it died)."""
        if worker.dead:
            return
        try:
            worker.executor.submit(fn, *args)
        except BrokenProcessPool:
            self._replace(worker)

    def _replace(self, worker: Worker) -> None:
        """Put a fresh process in the place of the dead ``worker``."""
        if worker.dead:
            return
        worker.dead = True
        worker.executor.shutdown(wait=False, cancel_futures=True)
        self.workers[worker.number] = Worker(worker.number, self._context)
        self.replaced += 1

    def acquire(self, task: Task) -> RemoteEnv:
        """A handle to a fresh env slot on the least-loaded worker (reset it before use).

        The env's spec must pickle: entry points (and wrappers) given as ``"module:Name"``
        strings or importable classes.
        """
        spec = palaestra.spec(task.env_id)
        worker = min(self.workers, key=lambda candidate: candidate.load)
        worker.load += 1
        return RemoteEnv(self, worker, next(self._handles), spec, dict(task.env_kwargs))

    def release(self, task: Task, handle: RemoteEnv, *, healthy: bool) -> None:
        handle.release(healthy)

    def close(self) -> None:
        """Stop every worker process (the envs' calls still queued are cancelled)."""
        for worker in self.workers:
            worker.executor.shutdown(wait=True, cancel_futures=True)

    async def __aenter__(self) -> ProcessEnvPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
