"""The rollout engine (``DESIGN.md`` §4): asyncio episodes, no lock-step, streamed results.

Each episode is a coroutine that steps its env as soon as its agent's action arrives; a
fixed number of workers (the concurrency bound) pull tasks and push finished episodes to a
stream. An episode whose env or agent raises is marked ``error`` and counted; the run goes on.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import palaestra
from palaestra.agents.base import Action, Agent, Conversation, acts_inline, resolve_action
from palaestra.core.env import Env
from palaestra.core.types import Episode, Message, Turn
from palaestra.runner.process import ProcessEnvPool, RemoteEnv
from palaestra.runner.tasks import Task
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder

logger = logging.getLogger(__name__)

_AGENT_SEED_SALT = 0x5A6E7
"""Keeps agent rngs apart from env rngs: numpy seeds ``s`` and ``(s, 0)`` give the same stream."""

_STREAM_WINDOW = 16
"""Finished episodes a stream holds unread before its workers pause for the reader."""

_Item = TypeVar("_Item")

DEFAULT_MAX_TURNS = 64
"""Turn cap for envs that set no ``max_turns`` of their own and runs that give none."""


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
    :data:`DEFAULT_MAX_TURNS`); ``max_episode_tokens`` truncates an episode whose token
    sequence grows past it (needs an agent with a tokenizer); ``process_workers`` > 0 hosts
    the envs in that many worker processes. ``mask_observations=False`` trains on observation
    tokens too.

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
        process_workers: int = 0,
        mask_observations: bool = True,
        policy_version: int = 0,
        template_kwargs: dict[str, Any] | None = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        tokenizer = getattr(agent, "tokenizer", None)
        if max_episode_tokens is not None and tokenizer is None:
            raise ValueError("max_episode_tokens needs an agent with a tokenizer")
        self.agent = agent
        self._acts_inline = acts_inline(agent)
        self._tokenizer = tokenizer
        self.concurrency = concurrency
        self.max_turns = max_turns
        self.max_episode_tokens = max_episode_tokens
        self.process_workers = process_workers
        self.mask_observations = mask_observations
        self.policy_version = policy_version
        self.template_kwargs = template_kwargs
        self.stats = RunStats()
        self._free_envs: dict[tuple, list[Env]] = defaultdict(list)
        self._recorders: dict[tuple, TokenRecorder] = {}
        self._inline_envs: dict[tuple, bool] = {}
        self._process_pool: ProcessEnvPool | None = None

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
        if self.process_workers and self._process_pool is None:
            self._process_pool = ProcessEnvPool(self.process_workers)
        try:
            if self._acts_inline and self._process_pool is None:
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
            if self._process_pool is not None:
                self._process_pool.close()
                self._process_pool = None

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
                env = _make_env(task)
            except Exception:
                return True  # run_episode records the error, without waiting
            self._free_envs[key].append(env)
            known = self._inline_envs[key] = _steps_inline(type(env))
        return known

    async def run_episode(self, task: Task) -> Episode:
        """Run one episode to its end; never raises for env or agent errors."""
        started = time.perf_counter()
        episode = Episode(
            task.env_id, task.seed, "", group_id=task.group_id, policy_version=self.policy_version
        )
        try:
            if self._process_pool is None:
                await self._play_local(task, episode)
            else:
                await self._play_remote(self._process_pool, task, episode)
        except Exception as exc:
            episode.error = f"{type(exc).__name__}: {exc}"
            logger.warning("episode %s seed=%s failed: %s", task.env_id, task.seed, episode.error)
        episode.duration_s = time.perf_counter() - started
        stats = self.stats
        stats.episodes += 1
        stats.turns += len(episode.turns)
        stats.errors += episode.error is not None
        return episode

    async def _play_local(self, task: Task, episode: Episode) -> None:
        """Play on an in-process env, reused by later tasks only if the episode went well."""
        free = self._free_envs[task.env_key]
        env = free.pop() if free else _make_env(task)
        await self._play(env, task, episode)
        free.append(env)

    async def _play_remote(self, pool: ProcessEnvPool, task: Task, episode: Episode) -> None:
        """Play on an env in ``pool``; its worker is released however the episode ends."""
        env = pool.acquire(task.env_id, dict(task.env_kwargs))
        healthy = False
        try:
            await self._play(env, task, episode)
            healthy = True
        finally:
            await env.release(healthy)

    async def _play(self, env: Env | RemoteEnv, task: Task, episode: Episode) -> None:
        inline = _steps_inline(type(env))
        if inline:
            observation, info = env.reset(seed=task.seed)
        else:
            observation, info = await env.areset(seed=task.seed)
        episode.task = observation
        episode.system_prompt = system_prompt = env.system_prompt
        messages: list[Message] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        messages.append({"role": "user", "content": observation})
        turns = episode.turns
        conversation = Conversation(
            messages,
            env.tools,
            turns=turns,
            env=env if isinstance(env, Env) else None,
            seed=None if task.seed is None else (task.seed, task.sample_index, _AGENT_SEED_SALT),
        )
        recorder = None if self._tokenizer is None else self._recorder(env)
        if recorder is not None:
            conversation.prompt_ids = recorder.start(episode, messages)
        limit = self.max_turns or env.max_turns or DEFAULT_MAX_TURNS
        act = self.agent.act
        inline_act = self._acts_inline
        for turn_number in range(limit):
            action = act(conversation) if inline_act else await act(conversation)
            if not isinstance(action, Action):
                action = await resolve_action(action)
            if recorder is not None:
                completion = recorder.add_action(episode, action, turn_number)
            if inline:
                observation, reward, terminated, truncated, info = env.step(action.text)
            else:
                observation, reward, terminated, truncated, info = await env.astep(action.text)
            role = info.get("role", "user")
            turns.append(
                Turn(
                    action.text,
                    observation,
                    float(reward),
                    terminated,
                    truncated,
                    info,
                    role,
                    action.token_ids,
                    action.logprobs,
                    action.finish_reason,
                )
            )
            if terminated or truncated:
                if truncated:
                    episode.truncation_reason = info.get("truncation_reason", "env")
                break
            if turn_number == limit - 1:
                self._truncate(episode, "turn_limit")
                break
            if recorder is not None:
                conversation.prompt_ids = recorder.add_observation(
                    episode, conversation.messages[-1], completion, turn_number
                )
                if (
                    self.max_episode_tokens is not None
                    and len(episode.token_ids) >= self.max_episode_tokens
                ):
                    self._truncate(episode, "token_budget")
                    break
        episode.success = bool(info.get("success", False))
        metrics = info.get("metrics")
        if metrics:
            episode.metrics = dict(metrics)

    @staticmethod
    def _truncate(episode: Episode, reason: str) -> None:
        episode.turns[-1].truncated = True
        episode.truncation_reason = reason

    def _recorder(self, env: Env | RemoteEnv) -> TokenRecorder:
        tokenizer = self._tokenizer
        tools = env.tools
        key = (id(tokenizer), repr(tools))
        recorder = self._recorders.get(key)
        if recorder is None:
            chat = ChatTokenizer(tokenizer, tools=tools, template_kwargs=self.template_kwargs)
            recorder = TokenRecorder(chat, mask_observations=self.mask_observations)
            self._recorders[key] = recorder
        return recorder


def _make_env(task: Task) -> Env:
    """A new in-process env for ``task``."""
    return palaestra.make(task.env_id, **task.env_kwargs)


@functools.cache
def _steps_inline(env_type: type) -> bool:
    """Whether ``areset``/``astep`` of this env type would just call ``reset``/``step``
    inline; the runner then calls those directly (a coroutine less per call)."""
    return (
        issubclass(env_type, Env)
        and not env_type.threaded_step
        and env_type.areset is Env.areset
        and env_type.astep is Env.astep
    )
