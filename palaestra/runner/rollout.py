"""The rollout engine (``DESIGN.md`` §4): asyncio episodes, no lock-step, streamed results.

Each episode is a coroutine that steps its env as soon as its agent's action arrives; a
fixed number of workers (the concurrency bound) pull tasks and push finished episodes to a
stream. An episode whose env or agent raises is marked ``error`` and counted; the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import palaestra
from palaestra.agents.base import Action, Agent, Conversation
from palaestra.core.env import Env, StepResult
from palaestra.core.types import Episode, Message, Turn
from palaestra.runner.process import ProcessEnvPool, RemoteEnv
from palaestra.runner.tasks import Task
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder

logger = logging.getLogger(__name__)

_AGENT_SEED_SALT = 0x5A6E7
"""Keeps agent rngs apart from env rngs: numpy seeds ``s`` and ``(s, 0)`` give the same stream."""

_STREAM_WINDOW = 64
"""Finished episodes a stream holds unread before its workers pause for the reader."""

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
        self._process_pool: ProcessEnvPool | None = None

    def run(self, tasks: Iterable[Task]) -> list[Episode]:
        """Run every task and return the episodes in task order (blocking)."""
        return asyncio.run(self.collect(tasks))

    async def collect(self, tasks: Iterable[Task]) -> list[Episode]:
        """Run every task; the episodes come back in task order."""
        tasks = list(tasks)
        order = {id(task): i for i, task in enumerate(tasks)}
        results: list[Episode | None] = [None] * len(tasks)
        async for task, episode in self.stream_with_tasks(tasks):
            results[order[id(task)]] = episode
        return [episode for episode in results if episode is not None]

    async def stream(self, tasks: Iterable[Task]) -> AsyncIterator[Episode]:
        """Yield episodes as they finish (completion order, not task order)."""
        async for _, episode in self.stream_with_tasks(tasks):
            yield episode

    async def stream_with_tasks(self, tasks: Iterable[Task]) -> AsyncIterator[tuple[Task, Episode]]:
        """Like :meth:`stream`, paired with the task each episode ran."""
        self.stats = RunStats()
        pending = iter(tasks)
        done: asyncio.Queue[tuple[Task, Episode] | None] = asyncio.Queue()
        paused: deque[asyncio.Future[None]] = deque()
        loop = asyncio.get_running_loop()
        if self.process_workers and self._process_pool is None:
            self._process_pool = ProcessEnvPool(self.process_workers)

        async def worker() -> None:
            try:
                for task in pending:
                    done.put_nowait((task, await self.run_episode(task)))
                    if done.qsize() >= _STREAM_WINDOW:
                        # Backpressure: episodes whose agent never waits would otherwise
                        # pile up unread (and keep the garbage collector busy).
                        gate = loop.create_future()
                        paused.append(gate)
                        await gate
            finally:
                done.put_nowait(None)

        workers = [asyncio.create_task(worker()) for _ in range(self.concurrency)]
        remaining = len(workers)
        try:
            while remaining:
                if done.empty() and paused:
                    # The reader caught up: resume one paused worker (one at a time keeps
                    # instant agents from cycling through every worker per window).
                    gate = paused.popleft()
                    if not gate.done():
                        gate.set_result(None)
                item = done.get_nowait() if not done.empty() else await done.get()
                if item is None:
                    remaining -= 1
                    continue
                yield item
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if self._process_pool is not None:
                self._process_pool.close()
                self._process_pool = None

    async def run_episode(self, task: Task) -> Episode:
        """Run one episode to its end; never raises for env or agent errors."""
        episode = Episode(
            env_id=task.env_id,
            seed=task.seed,
            task="",
            group_id=task.group_id,
            policy_version=self.policy_version,
        )
        env: Env | RemoteEnv | None = None
        healthy = False
        started = time.perf_counter()
        env_key = task.env_key
        try:
            env = self._acquire_env(task, env_key)
            await self._play(env, task, episode)
            healthy = True
        except Exception as exc:
            episode.error = f"{type(exc).__name__}: {exc}"
            logger.warning("episode %s seed=%s failed: %s", task.env_id, task.seed, episode.error)
        finally:
            if isinstance(env, RemoteEnv):
                await env.release(healthy)
            elif env is not None and healthy:
                self._free_envs[env_key].append(env)
        episode.duration_s = time.perf_counter() - started
        self.stats.episodes += 1
        self.stats.turns += len(episode.turns)
        self.stats.errors += episode.error is not None
        return episode

    async def _play(self, env: Env | RemoteEnv, task: Task, episode: Episode) -> None:
        observation, info = await env.areset(seed=task.seed)
        episode.task = observation
        episode.system_prompt = env.system_prompt
        messages: list[Message] = []
        if env.system_prompt:
            messages.append({"role": "system", "content": env.system_prompt})
        messages.append({"role": "user", "content": observation})
        conversation = Conversation(
            messages,
            tools=env.tools,
            env=env if isinstance(env, Env) else None,
            seed=None if task.seed is None else (task.seed, task.sample_index, _AGENT_SEED_SALT),
        )
        recorder = None if self._tokenizer is None else self._recorder(env)
        if recorder is not None:
            conversation.prompt_ids = recorder.start(episode, messages)
        limit = self.max_turns or env.max_turns or DEFAULT_MAX_TURNS
        agent = self.agent
        inline_step = _inline_step(env)
        for turn_number in range(limit):
            action: Action = await agent.act(conversation)
            if recorder is not None:
                completion = recorder.add_action(episode, action, turn_number)
            if inline_step is not None:
                observation, reward, terminated, truncated, info = inline_step(action.text)
            else:
                observation, reward, terminated, truncated, info = await env.astep(action.text)
            role = info.get("role", "user")
            episode.turns.append(
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
            messages.append({"role": "assistant", "content": action.text})
            message = {"role": role, "content": observation}
            messages.append(message)
            if recorder is not None:
                conversation.prompt_ids = recorder.add_observation(
                    episode, message, completion, turn_number
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

    def _acquire_env(self, task: Task, env_key: tuple) -> Env | RemoteEnv:
        if self._process_pool is not None:
            return self._process_pool.acquire(task.env_id, dict(task.env_kwargs))
        free = self._free_envs[env_key]
        return free.pop() if free else palaestra.make(task.env_id, **task.env_kwargs)


def _inline_step(env: Env | RemoteEnv) -> Callable[[str], StepResult] | None:
    """``env.step`` when ``env.astep`` would just call it inline (saves a coroutine per turn)."""
    if isinstance(env, Env) and not env.threaded_step and type(env).astep is Env.astep:
        return env.step
    return None
