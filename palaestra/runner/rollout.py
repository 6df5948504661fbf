"""The rollout engine (``docs/runner.md``): scheduling episodes, no lock-step, streamed results.

Each episode is a coroutine that steps its env as soon as its agent's action arrives; a
fixed number of workers (the concurrency bound) pull tasks and push finished episodes to a
stream. An episode whose env or agent raises is marked ``error`` and counted; the run goes on.
Playing one episode is :mod:`palaestra.runner.episode`; where envs live is an env host
(:mod:`palaestra.runner.hosts`: in-process, or a process pool).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from palaestra.agents.base import Agent
from palaestra.core.types import Episode
from palaestra.runner.episode import EpisodePlayer
from palaestra.runner.hosts import EnvHost, LocalEnvHost
from palaestra.runner.process import ProcessEnvPool
from palaestra.runner.tasks import Task

logger = logging.getLogger(__name__)

_STREAM_WINDOW = 16
"""Finished episodes a stream holds unread before its workers pause for the reader."""

_Item = TypeVar("_Item")


@dataclass(slots=True)
class RunStats:
    """Counters of a run, updated as episodes finish."""

    episodes: int = 0
    errors: int = 0
    turns: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started


class Runner:
    """Runs tasks with one agent, ``concurrency`` episodes at a time.

    ``max_turns`` caps every episode (default: the env's own limit, else
    :data:`~palaestra.runner.episode.DEFAULT_MAX_TURNS`); ``max_episode_tokens`` bounds an
    episode's token sequence and ``max_response_tokens`` what follows its prompt, while it is
    played (:mod:`palaestra.runner.episode`; both need an agent with a tokenizer);
    ``process_workers`` > 0 hosts the envs in that many worker processes, and ``host`` any
    other :class:`~palaestra.runner.hosts.EnvHost`. ``mask_observations=False`` trains on
    observation and tool-result tokens too.

    >>> runner = Runner(OracleAgent(), concurrency=32)  # doctest: +SKIP
    >>> episodes = runner.run(make_tasks(["game:Wordle-v0"], range(8)))  # doctest: +SKIP
    """

    def __init__(
        self,
        agent: Agent,
        *,
        concurrency: int = 64,
        max_turns: int | None = None,
        max_episode_tokens: int | None = None,
        max_response_tokens: int | None = None,
        process_workers: int = 0,
        host: EnvHost | None = None,
        mask_observations: bool = True,
        policy_version: int = 0,
        template_kwargs: dict[str, Any] | None = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if process_workers and host is not None:
            raise ValueError("give process_workers= or host=, not both")
        self.agent = agent
        self.player = EpisodePlayer(
            agent,
            max_turns=max_turns,
            max_episode_tokens=max_episode_tokens,
            max_response_tokens=max_response_tokens,
            mask_observations=mask_observations,
            template_kwargs=template_kwargs,
        )
        self.concurrency = concurrency
        self.process_workers = process_workers
        self.policy_version = policy_version
        self.stats = RunStats()
        self._local = LocalEnvHost()
        self._host: EnvHost = host or self._local
        self._inline_envs: dict[tuple, bool] = {}

    @property
    def max_turns(self) -> int | None:
        return self.player.max_turns

    def run(self, tasks: Iterable[Task]) -> list[Episode]:
        """Run every task and return the episodes in task order (blocking)."""
        return asyncio.run(self.collect(tasks))

    async def collect(self, tasks: Iterable[Task]) -> list[Episode]:
        """Run every task; the episodes come back in task order."""
        tasks = list(tasks)
        results: list[Episode | None] = [None] * len(tasks)
        async for position, episode in self.stream_enumerated(tasks):
            results[position] = episode
        return [episode for episode in results if episode is not None]

    def stream(self, tasks: Iterable[Task]) -> AsyncIterator[Episode]:
        """Yield episodes as they finish (completion order, not task order)."""
        return self._stream(tasks, lambda position, episode: episode)

    def stream_enumerated(self, tasks: Iterable[Task]) -> AsyncIterator[tuple[int, Episode]]:
        """Like :meth:`stream`, each episode paired with its task's position in ``tasks``."""
        return self._stream(tasks, lambda position, episode: (position, episode))

    async def _stream(
        self, tasks: Iterable[Task], emit: Callable[[int, Episode], _Item]
    ) -> AsyncIterator[_Item]:
        """Run ``tasks``; yield ``emit(task position, episode)`` as episodes finish.

        An episode that can never wait (its agent acts inline on an env that steps inline)
        is played right here when the reader asks for it: concurrency buys such episodes
        nothing, and handing them to a worker costs more than a cheap episode does. The first
        task that may wait hands it and the rest to ``concurrency`` workers.
        """
        self.stats = RunStats()
        pending: Iterator[tuple[int, Task]] = enumerate(tasks)
        pool = ProcessEnvPool(self.process_workers) if self.process_workers else None
        if pool is not None:
            self._host = pool
        try:
            if self.player.acts_inline and self._host is self._local:
                for position, task in pending:
                    if not self._never_waits(task):
                        pending = itertools.chain([(position, task)], pending)
                        break
                    yield emit(position, await self.run_episode(task))
                else:
                    return
            async for item in self._stream_from_workers(pending, emit):
                yield item
        finally:
            if pool is not None:
                pool.close()
                self._host = self._local

    async def _stream_from_workers(
        self, pending: Iterator[tuple[int, Task]], emit: Callable[[int, Episode], _Item]
    ) -> AsyncIterator[_Item]:
        """``concurrency`` workers play the ``pending`` tasks; yields as episodes finish."""
        finished: deque[_Item] = deque()
        paused: deque[asyncio.Future[None]] = deque()
        reader: list[asyncio.Future[None]] = []  # the reader's wake-up call, while it waits
        failures: list[BaseException] = []
        running = self.concurrency
        loop = asyncio.get_running_loop()

        def wake_reader() -> None:
            if reader and not reader[0].done():
                reader[0].set_result(None)

        async def worker() -> None:
            nonlocal running
            try:
                for position, task in pending:
                    finished.append(emit(position, await self.run_episode(task)))
                    wake_reader()
                    if len(finished) >= _STREAM_WINDOW:
                        # Backpressure: episodes whose agent never waits would otherwise
                        # pile up unread (and keep the garbage collector busy).
                        gate = loop.create_future()
                        paused.append(gate)
                        await gate
            except Exception as exc:  # a bug, not an episode error: run_episode catches those
                failures.append(exc)
            finally:
                running -= 1
                wake_reader()

        workers = [asyncio.create_task(worker()) for _ in range(running)]
        try:
            while True:
                while finished:
                    yield finished.popleft()
                if failures:
                    raise failures[0]
                if not running:
                    break
                if paused:
                    # The reader caught up: resume one paused worker (one at a time keeps
                    # instant agents from cycling through every worker per window).
                    paused.popleft().set_result(None)
                reader[:] = [loop.create_future()]
                await reader[0]
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def _never_waits(self, task: Task) -> bool:
        """Whether an episode of ``task`` runs start to end without suspending: the agent acts
        inline and the env steps inline (known once one env of the kind is built)."""
        key = task.env_key
        known = self._inline_envs.get(key)
        if known is None:
            try:
                known = self._inline_envs[key] = self._local.steps_inline(task)
            except Exception:
                return True  # run_episode records the error, without waiting
        return known

    async def run_episode(self, task: Task) -> Episode:
        """Run one episode to its end; never raises for env or agent errors."""
        started = time.perf_counter()
        episode = Episode(
            task.env_id, task.seed, "", group_id=task.group_id, policy_version=self.policy_version
        )
        host = self._host
        try:
            env = host.acquire(task)
            healthy = False
            try:
                await self.player.play(env, task, episode)
                healthy = True
            finally:
                host.release(task, env, healthy=healthy)
        except Exception as exc:
            episode.error = f"{type(exc).__name__}: {exc}"
            logger.warning("episode %s seed=%s failed: %s", task.env_id, task.seed, episode.error)
        episode.duration_s = time.perf_counter() - started
        stats = self.stats
        stats.episodes += 1
        stats.turns += len(episode.turns)
        stats.errors += episode.error is not None
        return episode
