"""A support conversation over a stateful backend: the agent calls tools and talks to a user.

``ToolUseEnv`` is the conversation: the first observation is the user's request, and every
action without a tool call is a message to the user, whose reply is the next observation.
``DomainTools`` (a :class:`~palaestra.envs.tool_env.ToolEnv`) adds the backend's tools:
actions with tool calls run them against the episode's database and get the results (role
``tool``). The registered ``tools:*`` ids are the two together.

Reward: 1 when the conversation ends with the database equal to the reference actions'
replay on a fresh copy and every required fact told to the user, else 0 (see
:mod:`palaestra.envs.tools.backend`). The user ends the conversation (satisfied, or out of
patience); the episode also ends after ``max_turns`` messages to the user, graded the same
way, or when the turn budget of the tool wrapper runs out (reward 0).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

import numpy as np
import pydantic

from palaestra.agents.spec import make_agent
from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import EPISODE_OVER, TurnBasedEnv, difficulty_preset
from palaestra.envs.tool_env import ToolEnv
from palaestra.envs.tools.backend import (
    Backend,
    ToolTask,
    mentions,
    replay,
    state_diff,
    state_hash,
)
from palaestra.envs.tools.user import Progress, ScriptedUser, SimulatedUser, UserTurn
from palaestra.tools.function import run_coroutine

DOMAINS = {
    "shop": "palaestra.envs.tools.shop:Shop",
    "bank": "palaestra.envs.tools.bank:Bank",
    "clinic": "palaestra.envs.tools.clinic:Clinic",
}
LEVELS = {"easy": {"levels": (1,)}, "medium": {"levels": (2,)}, "hard": {"levels": (3,)}}
LEVELS["mixed"] = {"levels": (1, 2, 3)}
MAX_MESSAGE_CHARS = 2000
"""The part of a message to the user that counts (a policy must not list every possible fact)."""

SYSTEM_PROMPT = """You are a customer support agent of {company}. Help the customer with their \
request using the tools, following the policy below exactly. A message without a tool call is \
sent to the customer. Tell the customer the outcome of what you did.

# Policy
{policy}"""


def backend_type(domain: str | type[Backend]) -> type[Backend]:
    """The backend class of a domain name (``"shop"``, ``"bank"``, ``"clinic"``)."""
    if not isinstance(domain, str):
        return domain
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; choose one of {sorted(DOMAINS)}")
    module, _, name = DOMAINS[domain].partition(":")
    return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=16)
def database(backend: type[Backend], db_seed: int) -> pydantic.BaseModel:
    """The domain's database for ``db_seed`` (built once per process; never modified)."""
    return backend.generate(np.random.default_rng(db_seed))


@functools.lru_cache(maxsize=16)
def snapshot(backend: type[Backend], db_seed: int) -> dict[str, Any]:
    """:func:`database` as plain data, which episodes copy from."""
    return database(backend, db_seed).model_dump()


def make_user(user: str | SimulatedUser) -> SimulatedUser:
    """``"scripted"``, an agent spec (``"openai:MODEL@URL"``, see ``palaestra.agents``) for a
    model playing the user, or a user object."""
    if not isinstance(user, str):
        return user
    if user == "scripted":
        return ScriptedUser()
    from palaestra.envs.tools.user import AgentUser

    return AgentUser(make_agent(user))


class ToolUseEnv(TurnBasedEnv):
    """The conversation with a simulated user (see module docstring).

    Args:
        domain: ``"shop"``, ``"bank"``, ``"clinic"``, or a :class:`Backend` subclass.
        difficulty: ``easy`` (one action), ``medium`` (several dependent actions), ``hard``
            (needs what only the user knows), or ``mixed``.
        db_seed: the seed of the domain's database (tasks vary with the reset seed).
        user: ``"scripted"``, an agent spec for a model as the user, or a user object.
        max_turns: messages to the user before the conversation is cut.
    """

    reward_range = (0.0, 1.0)

    def __init__(
        self,
        domain: str | type[Backend] = "shop",
        *,
        difficulty: str = "medium",
        db_seed: int = 0,
        user: str | SimulatedUser = "scripted",
        max_turns: int = 10,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.backend_type = backend_type(domain)
        self.levels: tuple[int, ...] = difficulty_preset(LEVELS, difficulty)["levels"]
        self.db_seed = db_seed
        self.user = make_user(user)
        self.max_turns = max_turns
        self.backend = self.backend_type()
        self._referee = self.backend_type()  # replays the reference actions
        self._task: ToolTask | None = None
        self._expected = ""
        self._said: list[str] = []

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT.format(
            company=self.backend_type.company, policy=self.backend_type.policy.strip()
        )

    @property
    def task(self) -> ToolTask:
        if self._task is None:
            raise RuntimeError("call reset() before reading the task")
        return self._task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        options = options or {}
        db = database(self.backend_type, self.db_seed)
        level = int(
            options.get("level", self.levels[int(self.np_random.integers(len(self.levels)))])
        )
        task = self.backend_type.generate_task(db, self.np_random, level)
        initial = snapshot(self.backend_type, self.db_seed)
        self._expected = state_hash(replay(self._referee, initial, task.actions))
        self.backend.load(initial)
        self._task, self._said = task, []
        self.start()
        return self.user.start(task), {"role": "user", "level": task.level}

    def progress(self) -> Progress:
        """Whether the database is the reference end state and every required fact was said."""
        reported = all(
            any(mentions(text, fact) for text in self._said) for fact in self.task.report
        )
        return Progress(state_hash(self.backend.db) == self._expected, reported)

    def mismatch(self) -> list[str]:
        """Paths where the database differs from the reference end state (for logs)."""
        initial = snapshot(self.backend_type, self.db_seed)
        return state_diff(replay(self._referee, initial, self.task.actions), self.backend.db)

    def play(self, action: str) -> StepResult:
        progress = self._message(action)
        reply = self.user.respond(action, progress)
        if inspect.isawaitable(reply):
            reply = run_coroutine(reply)
        return self._reply(reply, progress)

    async def astep(self, action: str) -> StepResult:
        if self.done:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        self.turn += 1
        progress = self._message(action)
        reply = self.user.respond(action, progress)
        if inspect.isawaitable(reply):
            reply = await reply
        return self._reply(reply, progress)

    def _message(self, action: str) -> Progress:
        self._said.append(action[:MAX_MESSAGE_CHARS])
        return self.progress()

    def _reply(self, reply: UserTurn, progress: Progress) -> StepResult:
        if not (reply.stop or self.turns_left() <= 0):
            return self.proceed(reply.text)
        success = progress.satisfied
        return self.finish(
            reply.text,
            float(success),
            success,
            database_match=float(progress.database_done),
            reported=float(progress.reported),
            level=float(self.task.level),
        )

    def render_text(self) -> str:
        if self._task is None:
            return "(not reset)"
        progress = self.progress()
        return (
            f"{self.backend_type.name}, level {self.task.level}: {self.task.goal}\n"
            f"-- message {self.turn}/{self.max_turns}, database done: {progress.database_done}, "
            f"reported: {progress.reported}"
        )


class DomainTools(ToolEnv):
    """A :class:`ToolUseEnv` with its backend's tools (the ``tools:*`` ids)."""

    def __init__(self, env: ToolUseEnv, *, format: str = "hermes", max_tool_turns: int = 20):
        inner = env.unwrapped
        if not isinstance(inner, ToolUseEnv):
            raise TypeError(f"DomainTools wraps a ToolUseEnv, got {type(inner).__name__}")
        super().__init__(env, inner.backend.tools(), format=format, max_tool_turns=max_tool_turns)

    def oracle(self) -> Policy:
        """Ask for what only the user knows, make every reference call in one action, then
        tell the user the outcome with the required facts."""
        task: ToolTask = self.env.unwrapped.task
        steps = []
        if task.facts:
            topics = ", ".join(fact.topics[0] for fact in task.facts)
            steps.append(f"I can help with that. Could you tell me: {topics}?")
        if task.actions:
            steps.append(
                "\n".join(self.format.format(call, self.own_tools) for call in task.actions)
            )
        done = " ".join(("All done.", *task.report))
        plan = iter(steps)
        return lambda observation: next(plan, None) or done
