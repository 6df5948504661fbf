"""A support conversation over a stateful backend: the agent calls tools and talks to a user.

``ToolUseEnv`` is the conversation: the first observation is the user's request, and every
action without a tool call is a message to the user, whose reply is the next observation.
``DomainTools`` (a :class:`~palaestra.envs.tool_env.ToolEnv`) adds the backend's tools:
actions with tool calls run them against the episode's database and get the results (role
``tool``). The registered ``tools:*`` ids are the two together.

Each episode draws its database from the reset seed (``db_seed=None``; an int pins one
database): ids, names, amounts and answers vary per seed, and seeds from the trainer's
``eval_first_seed`` (1,000,000) on give databases no training seed below it gives. Recently
built databases and recently drawn tasks are cached (a GRPO group replays one seed several
times).

Reward: 1 when the conversation ends with (a) the database equal to the reference actions'
replay on a fresh copy, (b) every required fact told to the user and no value made up
(:mod:`palaestra.envs.tools.facts`), and (c) the task's action checks held, with no call
made before the user told the facts it needs; else 0 (see
:mod:`palaestra.envs.tools.backend`). The user ends the conversation (the agent closed it,
or the user ran out of patience), judging from the agent's messages and the values shown to
the agent only: it never sees the grade, so its replies tell the agent nothing of it. The
episode also ends after ``max_turns`` messages to the user, graded the same way, or when
the turn budget of the tool wrapper runs out (reward 0).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import numpy as np
import pydantic

from palaestra.agents.spec import make_agent
from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.core.messages import without_reasoning
from palaestra.core.tool_calls import ParsedToolCalls, ToolCall
from palaestra.envs.base import EPISODE_OVER, TurnBasedEnv, difficulty_preset
from palaestra.envs.tool_env import ToolEnv
from palaestra.envs.tools.backend import Backend, ToolTask, chunks, replay, state_diff
from palaestra.envs.tools.checks import ActionCheck, Before, Call, Grounded, Required, matches
from palaestra.envs.tools.facts import (
    REASON,
    SLACK,
    Fact,
    Values,
    Vocabulary,
    judge,
    known,
    merge,
    shown,
    values,
    worked_out_from,
)
from palaestra.envs.tools.user import FACTS_PER_REPLY, ScriptedUser, SimulatedUser, UserTurn
from palaestra.tools.function import run_coroutine

DOMAINS = {
    "shop": "palaestra.envs.tools.shop:Shop",
    "bank": "palaestra.envs.tools.bank:Bank",
    "clinic": "palaestra.envs.tools.clinic:Clinic",
}
LEVELS = {"easy": {"levels": (1,)}, "medium": {"levels": (2,)}, "hard": {"levels": (3,)}}
LEVELS["mixed"] = {"levels": (1, 2, 3)}
CONVERSATION_SLACK = 0
"""Values the whole conversation may state in place of a fact: of the fact's kind, in a message
sent once the agent could know the fact's value (shown, or worked out from values shown) that
does not state it, neither the user's own nor worked out from the fact by the domains'
arithmetic (a new balance, what is left of a limit, an end time). None: a fact is told with
one value, and values tried one a message fail it wherever the right one comes. Values beside
the fact in the message that tells it follow the per-message rule
(:data:`~palaestra.envs.tools.facts.DEFAULT_SLACK`: the old time beside the new one); details
of the records named before the fact could be known (a plan naming the old card's last four
digits) compete with nothing; the fact repeated is one value; a refusal names one reason in
all."""
MAX_TOOL_ERRORS = 10
"""Failed tool calls an episode may make (tau2-bench's ``max_errors``); one more ends it."""
MAX_MESSAGE_CHARS = 2000
"""The part of a message to the user that counts (a policy must not list every possible fact)."""
EPISODE_DATABASE = 1
"""The stream of a reset seed that draws the episode's database (the task uses the env's)."""
MAX_DRAWS = 100
"""Tasks drawn before giving up on one whose request does not already hold its answer."""

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


DatabaseSeed = int | tuple[int, ...]


@functools.lru_cache(maxsize=48)
def database(backend: type[Backend], db_seed: DatabaseSeed) -> pydantic.BaseModel:
    """The domain's database for ``db_seed`` (an int, or the entropy of an episode's database:
    ``(seed, EPISODE_DATABASE)``), built once per process while recently used; never modified."""
    return backend.generate(np.random.default_rng(db_seed))


@functools.lru_cache(maxsize=48)
def snapshot(backend: type[Backend], db_seed: DatabaseSeed) -> dict[str, Any]:
    """:func:`database` as plain data, which episodes copy from."""
    return database(backend, db_seed).model_dump()


@functools.lru_cache(maxsize=8)
def shown_by_the_prompt(backend: type[Backend]) -> Values:
    """The values the system prompt and the tools' schemas show the agent (examples such as
    ``'#W1000'``, the daily limit)."""
    schemas = json.dumps([t.schema for t in backend().tools()])
    return shown(f"{backend.policy}\n{schemas}", backend.vocabulary)


class RecentDraws:
    """The tasks drawn last (a thread-safe LRU): a GRPO group replays one seed several times,
    and the draw and its replay cost as much as the rest of a reset."""

    def __init__(self, size: int = 64):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return self._items.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


RECENT_DRAWS = RecentDraws()


def _state_key(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state, sort_keys=True)


def make_user(user: str | SimulatedUser) -> SimulatedUser:
    """``"scripted"``, an agent spec (``"openai:MODEL@URL"``, see ``palaestra.agents``) for a
    model playing the user, or a user object."""
    if not isinstance(user, str):
        return user
    if user == "scripted":
        return ScriptedUser()
    from palaestra.envs.tools.user import AgentUser

    return AgentUser(make_agent(user))


@dataclasses.dataclass(frozen=True)
class Progress:
    """How far the episode is toward the task (the grade; the user never sees it)."""

    database_done: bool
    reported: bool
    rules_followed: bool = True

    @property
    def satisfied(self) -> bool:
        return self.database_done and self.reported and self.rules_followed


@dataclasses.dataclass
class Grading:
    """What the conversation has done so far toward the task (see :meth:`ToolUseEnv.progress`)."""

    seen: Values
    user_said: Values
    stated: Values = dataclasses.field(default_factory=dict)
    messages: list[tuple[Values, frozenset[Fact]]] = dataclasses.field(default_factory=list)
    """Each message's values, and the facts the agent could know when it was sent."""
    told: set[Fact] = dataclasses.field(default_factory=set)
    fabricated: list[str] = dataclasses.field(default_factory=list)
    guesses: list[str] = dataclasses.field(default_factory=list)
    calls_read: int = 0
    conversation: int = -1
    database_done: bool = False
    database_checked_at: int = -1


class ToolUseEnv(TurnBasedEnv):
    """The conversation with a simulated user (see module docstring).

    Args:
        domain: ``"shop"``, ``"bank"``, ``"clinic"``, or a :class:`Backend` subclass.
        difficulty: ``easy`` (one action), ``medium`` (several dependent actions), ``hard``
            (needs what only the user knows), or ``mixed``.
        db_seed: None (default) draws each episode's database from the reset seed; an int
            pins one database for every episode.
        user: ``"scripted"``, an agent spec for a model as the user, or a user object.
        max_turns: messages to the user before the conversation is cut.
    """

    reward_range = (0.0, 1.0)

    def __init__(
        self,
        domain: str | type[Backend] = "shop",
        *,
        difficulty: str = "medium",
        db_seed: int | None = None,
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
        self._episode_db: DatabaseSeed = 0
        self._expected: dict[str, Any] = {}
        self._grading = Grading(seen={}, user_said={})

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT.format(
            company=self.backend_type.company, policy=self.backend_type.policy.strip()
        )

    @property
    def task(self) -> ToolTask:
        """The episode's task, completed: every required fact and action check included."""
        if self._task is None:
            raise RuntimeError("call reset() before reading the task")
        return self._task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        options = options or {}
        self._episode_db = self._database_seed(seed)
        level = int(
            options.get("level", self.levels[int(self.np_random.integers(len(self.levels)))])
        )
        self._task = self._draw_task(level)
        self.backend.load(snapshot(self.backend_type, self._episode_db))
        seen: Values = {kind: set(found) for kind, found in self._prompt_values().items()}
        request = shown(self._task.request, self.backend_type.vocabulary)
        merge(seen, request)
        self._grading = Grading(seen=seen, user_said=request)
        self.start()
        return self.user.start(self._task), {"role": "user", "level": self._task.level}

    def _database_seed(self, seed: int | None) -> DatabaseSeed:
        if self.db_seed is not None:
            return self.db_seed
        if seed is None:
            seed = int(self.np_random.integers(2**63))
        return (seed, EPISODE_DATABASE)

    def _prompt_values(self) -> Values:
        return shown_by_the_prompt(self.backend_type)

    def _draw_task(self, level: int) -> ToolTask:
        """A task of ``level`` over the episode's database, completed (see :meth:`_draw`); the
        same database, level and generator state give the same task, so a recent draw is
        reused (with the generator moved on as the draw moved it)."""
        key = (self.backend_type, self._episode_db, level, _state_key(self.np_random))
        drawn = RECENT_DRAWS.get(key)
        if drawn is None:
            task = self._draw(level)
            drawn = (task, self._expected, self.np_random.bit_generator.state)
            RECENT_DRAWS.put(key, drawn)
        task, self._expected, state = drawn
        self.np_random.bit_generator.state = state
        return task

    def _draw(self, level: int) -> ToolTask:
        """Draw a task of ``level`` over the episode's database and replay it; tasks whose
        request or user facts already state a fact to tell are drawn again."""
        db = database(self.backend_type, self._episode_db)
        initial = snapshot(self.backend_type, self._episode_db)
        for _ in range(MAX_DRAWS):
            task = self.backend_type.generate_task(db, self.np_random, level)
            end = replay(self._referee, initial, task.actions)
            task = self._complete(task)
            if not self._answered_by_the_user(task):
                self._expected = end.model_dump()
                return task
        raise RuntimeError(f"no level-{level} {self.backend_type.name} task fits this database")

    def _complete(self, task: ToolTask) -> ToolTask:
        """``task`` with the facts and checks of the replay just made (see :class:`ToolTask`)."""
        referee, vocabulary = self._referee, self.backend_type.vocabulary
        report = tuple(dict.fromkeys((*task.report, *referee.told)))
        checks = tuple(_with_reason_phrases(check, vocabulary) for check in task.checks)
        return dataclasses.replace(
            task,
            report=report,
            checks=(*checks, *referee.policy_checks(task.actions)),
            outcomes=tuple(referee.outputs),
            topics=self.backend_type.topics,
            vocabulary=self.backend_type.vocabulary,
        )

    def _answered_by_the_user(self, task: ToolTask) -> bool:
        texts = " ".join((task.request, *(fact.text for fact in task.facts)))
        known = values(texts, task.vocabulary)
        return any(fact.value in known[fact.kind] for fact in task.report)

    # -- grading ---------------------------------------------------------------------------

    def progress(self) -> Progress:
        """Whether the database is the reference end state, every required fact was told with
        nothing made up, and the action checks hold with no write guessed."""
        grading = self._absorb_calls()
        return Progress(
            database_done=self._database_done(),
            reported=not grading.fabricated
            and set(self.task.report) <= grading.told
            and not self._overstated(),
            rules_followed=not grading.guesses and not self.check_problems(),
        )

    def seen(self) -> Values:
        """The values the episode has shown the agent so far (the system prompt, the user's
        messages, the tool results): what the user is told besides the agent's message."""
        return self._absorb_calls().seen

    def check_problems(self) -> list[str]:
        """How the calls so far break the task's action checks."""
        calls = self.backend.calls
        return [problem for check in self.task.checks if (problem := check.problem(calls))]

    def problems(self) -> list[str]:
        """Everything that keeps the episode from success so far (for logs and tests)."""
        grading = self._absorb_calls()
        missing = [
            f"not told: {f.what} ({f.text})" for f in self.task.report if f not in grading.told
        ]
        return [
            *(f"database differs at {path}" for path in self.mismatch()),
            *missing,
            *(f"made up: {value}" for value in grading.fabricated),
            *self._overstated(),
            *self.check_problems(),
            *grading.guesses,
        ]

    def _overstated(self) -> list[str]:
        """The facts to tell in whose place the conversation has stated more than
        :data:`CONVERSATION_SLACK` values (see there), and more reasons than the task's (the
        user's own aside): values tried one a message until the user is satisfied tell
        nothing."""
        grading, report = self._grading, self.task.report
        problems = []
        reasons = [fact for fact in report if fact.kind == REASON]
        said = grading.stated.get(REASON, set()) - grading.user_said.get(REASON, set())
        if reasons and len(said) > len(reasons) + SLACK[REASON]:
            problems.append(f"{len(said)} reasons stated (at most {len(reasons)})")
        for fact in report:
            instead = self._in_place_of(fact) if fact.kind != REASON else set()
            if len(instead) > CONVERSATION_SLACK:
                problems.append(f"stated in place of {fact.what}: {', '.join(sorted(instead))}")
        return problems

    def _in_place_of(self, fact: Fact) -> set[str]:
        """Values of ``fact``'s kind stated in messages that do not state it, sent once the
        agent could know it: none of the facts, none of the user's own, and none worked out from
        a fact of the kind with a value shown or stated beside them (the amount moved and the
        balance before it)."""
        grading, kind = self._grading, fact.kind
        facts = {f.value for f in self.task.report if f.kind == kind}
        exempt = facts | grading.user_said.get(kind, set())
        return {
            value
            for stated, knew in grading.messages
            if fact in knew and fact.value not in stated[kind]
            for value in stated[kind] - exempt
            if not any(
                worked_out_from(kind, value, reference, {**grading.seen, kind: pool})
                for pool in [grading.seen.get(kind, set()) | stated[kind]]
                for reference in facts
            )
        }

    def mismatch(self) -> list[str]:
        """Paths where the database differs from the reference end state (for logs)."""
        initial = snapshot(self.backend_type, self._episode_db)
        return state_diff(replay(self._referee, initial, self.task.actions), self.backend.db)

    def _database_done(self) -> bool:
        grading, revision = self._grading, self.backend.revision
        if grading.database_checked_at != revision:  # only tool calls and loads change it
            grading.database_done = self.backend.db.model_dump() == self._expected
            grading.database_checked_at = revision
        return grading.database_done

    def _absorb_calls(self) -> Grading:
        """Take in the tool calls made since the last look: their outputs are now shown to the
        agent, and a call made before the user told a fact it needs (``UserFact.needed_by``) is
        a guess."""
        grading, backend = self._grading, self.backend
        if grading.conversation != backend.conversation:  # the backend was loaded anew
            grading.conversation, grading.calls_read = backend.conversation, 0
        told = getattr(self.user, "told", None)
        for call, output in zip(
            backend.calls[grading.calls_read :], backend.outputs[grading.calls_read :], strict=True
        ):
            merge(grading.seen, shown(output, self.backend_type.vocabulary))
            if call.accepted and told is not None:
                grading.guesses += _guessed(call, self.task, told)
        grading.calls_read = len(backend.calls)
        return grading

    # -- the conversation ------------------------------------------------------------------

    def play(self, action: str) -> StepResult:
        action = without_reasoning(action)
        self._message(action)
        reply = self.user.respond(action, self.seen())
        if inspect.isawaitable(reply):
            reply = run_coroutine(reply)
        return self._reply(reply)

    async def astep(self, action: str) -> StepResult:
        if self.done:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        self.turn += 1
        action = without_reasoning(action)
        self._message(action)
        reply = self.user.respond(action, self.seen())
        if inspect.isawaitable(reply):
            reply = await reply
        return self._reply(reply)

    def _message(self, action: str) -> None:
        """Grade a message to the user: the facts it tells, the values it makes up or states."""
        grading = self._absorb_calls()
        verdict = judge(
            action[:MAX_MESSAGE_CHARS], self.task.report, grading.seen, self.task.vocabulary
        )
        grounded = not any(
            isinstance(check, Grounded) and check.problem(self.backend.calls)
            for check in self.task.checks
        )
        grading.told |= {f for f in verdict.told if grounded or f.kind != REASON}
        grading.fabricated += verdict.fabricated
        stated = verdict.stated
        merge(grading.stated, stated)
        knew = frozenset(f for f in self.task.report if known(f, grading.seen))
        grading.messages.append((stated, knew))

    def _reply(self, reply: UserTurn) -> StepResult:
        """The user's reply as the observation; when it ends the conversation (or the turns
        run out), the grade of the conversation up to the agent's last message."""
        ended = reply.stop or self.turns_left() <= 0
        progress = self.progress() if ended else None
        said = shown(reply.text, self.backend_type.vocabulary)
        merge(self._grading.seen, said)
        merge(self._grading.user_said, said)
        if progress is None:
            return self.proceed(reply.text)
        success = progress.satisfied
        return self.finish(reply.text, float(success), success, **self._final_metrics(progress))

    def _final_metrics(self, progress: Progress) -> dict[str, float]:
        return {
            "database_match": float(progress.database_done),
            "reported": float(progress.reported),
            "rules_followed": float(progress.rules_followed),
            "level": float(self.task.level),
        }

    def end_for_errors(self, errors: int, limit: int) -> StepResult:
        """End the episode with reward 0: ``errors`` tool calls failed, more than ``limit``."""
        return self.finish(
            f"The conversation ended: {errors} tool calls failed (at most {limit}).",
            0.0,
            False,
            **self._final_metrics(self.progress()),
            tool_errors=float(errors),
        )

    def render_text(self) -> str:
        if self._task is None:
            return "(not reset)"
        progress = self.progress()
        return (
            f"{self.backend_type.name}, level {self.task.level}: {self.task.goal}\n"
            f"-- message {self.turn}/{self.max_turns}, database done: {progress.database_done}, "
            f"reported: {progress.reported}, rules followed: {progress.rules_followed}"
        )


def _with_reason_phrases(check: ActionCheck, vocabulary: Vocabulary) -> ActionCheck:
    """A :class:`Grounded` check whose reason is a code of ``vocabulary``, with the code's
    phrases (what a tool's refusal for that reason says)."""
    if not isinstance(check, Grounded):
        return check
    phrases = [p for code in check.reason for p in vocabulary.reasons.get(code, (code,))]
    return dataclasses.replace(check, reason=tuple(dict.fromkeys((*check.reason, *phrases))))


def _guessed(call: Call, task: ToolTask, told: set[Any]) -> list[str]:
    missing = [f for f in task.facts if call.name in f.needed_by and f not in told]
    return [f"{call.name} was called before the user said: {fact.text}" for fact in missing]


class DomainTools(ToolEnv):
    """A :class:`ToolUseEnv` with its backend's tools (the ``tools:*`` ids). As in tau2-bench,
    the episode ends with reward 0 once more than ``max_errors`` tool calls have failed
    (refused, unknown, malformed)."""

    def __init__(
        self,
        env: ToolUseEnv,
        *,
        format: str = "hermes",
        max_tool_turns: int = 20,
        max_errors: int = MAX_TOOL_ERRORS,
    ):
        inner = env.unwrapped
        if not isinstance(inner, ToolUseEnv):
            raise TypeError(f"DomainTools wraps a ToolUseEnv, got {type(inner).__name__}")
        super().__init__(env, inner.backend.tools(), format=format, max_tool_turns=max_tool_turns)
        self.max_errors = max_errors
        self.errors = self.unrecorded_errors = 0

    def _start(self) -> None:
        super()._start()
        self.errors = self.unrecorded_errors = 0

    def _tool_step(self, parsed: ParsedToolCalls, outputs: list[str]) -> StepResult:
        """A tool step; failed calls (refused by a tool, of an unknown tool, malformed) count
        toward ``max_errors``; calls past the per-action cap, which never ran, do not."""
        result = super()._tool_step(parsed, outputs)
        self.unrecorded_errors += len(parsed.errors) + sum(
            call.name not in self.tool_map for call in parsed.calls
        )
        refused = sum(not call.accepted for call in self.env.unwrapped.backend.calls)
        self.errors = refused + self.unrecorded_errors
        if self.errors <= self.max_errors or result[2] or result[3]:
            return result
        inner: ToolUseEnv = self.env.unwrapped
        ended = inner.end_for_errors(self.errors, self.max_errors)
        return f"{result[0]}\n\n{ended[0]}", *ended[1:]  # type: ignore[return-value]

    def oracle(self) -> Policy:
        """Ask for what only the user knows (two facts per question), make the reference
        calls in one action (with the reads the checks want before them), then tell the user
        the required facts (or why the request cannot be done)."""
        task: ToolTask = self.env.unwrapped.task
        steps = [
            f"I can help with that. Could you tell me: {', '.join(f.topics[0] for f in pair)}?"
            for pair in chunks(task.facts, FACTS_PER_REPLY)
        ]
        calls = oracle_calls(task)
        if calls:
            steps.append("\n".join(self.format.format(call, self.own_tools) for call in calls))
        refused = any(fact.kind == REASON for fact in task.report)
        opening = "I'm sorry, I cannot do that:" if refused else "All done."
        done = " ".join((opening, *(fact.text + "." for fact in task.report)))
        plan = iter(steps)
        return lambda observation: next(plan, None) or done


def oracle_calls(task: ToolTask) -> list[ToolCall]:
    """The reference actions, each preceded by the reads its :class:`Before` checks want, and
    the calls :class:`Required` checks want before the last one."""
    calls: list[ToolCall] = []
    for action in task.actions:
        made = Call(action.name, action.arguments, accepted=True, writes=True)
        for check in task.checks:
            if isinstance(check, Before) and matches(check.then, made) and check.first not in calls:
                calls.append(check.first)
        calls.append(action)
    required = [c.call for c in task.checks if isinstance(c, Required) and c.call not in calls]
    return [*calls[:-1], *required, *calls[-1:]]
