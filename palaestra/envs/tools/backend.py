"""Stateful backends, tasks over them, and grading by final database state (tau2's way).

A :class:`Backend` holds one episode's database (a pydantic model) and the session of the
conversation (who has proved their identity); its methods marked :func:`tool` are the
agent's tools, and they enforce the domain's policies by raising
:class:`~palaestra.tools.ToolError` (no refund of an order that was not returned, no account
change before an identity check). Every call is recorded (:class:`~.checks.Call`), and a
tool that does what the policy says to tell the customer about registers the fact
(:meth:`Backend.tell`: the amount refunded, a new card's digits). A :class:`ToolTask` is what
a simulated user wants: the opening request, what only the user knows (told when asked), the
reference actions, facts the request asks for (or why it cannot be done) and action checks.

Grading (:func:`replay`, :func:`state_hash`): the reference actions are replayed on a
fresh copy of the database; an episode succeeds when its final database equals that replay
(any path to the same end state passes; the right action on the wrong item or one extra side
effect fails), every fact the replay's tools registered and the task asks for was told to
the user (:mod:`palaestra.envs.tools.facts`), and the action checks hold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np
import pydantic

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.checks import ActionCheck, Call, Grounded
from palaestra.envs.tools.facts import Fact, Vocabulary
from palaestra.tools import FunctionTool, ToolError

Database = TypeVar("Database", bound=pydantic.BaseModel)

_TOOL_MARK = "__palaestra_tool__"
MAX_IDENTITY_FAILURES = 3
"""Failed identity checks a conversation may make; then identity tools refuse."""


def tool(method: Callable[..., Any] | None = None, *, writes: bool = False) -> Callable[..., Any]:
    """Mark a :class:`Backend` method as a tool (its hints and docstring make the schema);
    ``@tool(writes=True)`` for one that changes the database."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _TOOL_MARK, "writes" if writes else "reads")
        return fn

    return mark if method is None else mark(method)


class RecordedTool(FunctionTool):
    """A backend method as a tool; each call is recorded in the backend's :attr:`~Backend.calls`."""

    def __init__(self, backend: Backend, method: Callable[..., Any], writes: bool):
        super().__init__(method)
        self.backend, self.writes = backend, writes

    def _record(self, arguments: Any, output: str) -> str:
        accepted = not output.startswith("error:")
        arguments = arguments if isinstance(arguments, dict) else {}
        identified = self.backend.identified
        call = Call(self.name, arguments, accepted, self.writes, identified, output)
        self.backend.calls.append(call)
        self.backend.outputs.append(output)
        self.backend.revision += 1
        return output

    def call(self, arguments: dict[str, Any]) -> str:
        return self._record(arguments, super().call(arguments))

    async def acall(self, arguments: dict[str, Any]) -> str:
        return self._record(arguments, await super().acall(arguments))


class Backend:
    """One domain's database and conversation session; its :func:`tool` methods are the tools.

    Subclasses set ``name``, ``company``, ``policy`` (the document the agent reads),
    ``database_type``, ``vocabulary`` (the names and refusal reasons its texts use),
    ``topics`` (every group of words a user fact is asked by), and the domain's generators:
    ``generate = staticmethod(...)`` (a database from an ``np.random.Generator``) and
    ``generate_task = staticmethod(...)`` (a :class:`ToolTask` of a level, 1 to 3, over a
    database, drawn from a generator).
    """

    name: ClassVar[str]
    company: ClassVar[str]
    policy: ClassVar[str]
    database_type: ClassVar[type[pydantic.BaseModel]]
    vocabulary: ClassVar[Vocabulary] = Vocabulary()
    topics: ClassVar[tuple[tuple[str, ...], ...]] = ()
    identity_key: ClassVar[str] = "customer_id"
    """The session key an identity check sets (who the conversation is about)."""
    generate: ClassVar[Callable[[np.random.Generator], pydantic.BaseModel]]
    generate_task: ClassVar[Callable[[Any, np.random.Generator, int], ToolTask]]

    def __init__(self) -> None:
        self._db: pydantic.BaseModel | None = None
        self._tools: list[FunctionTool] | None = None
        self.session: dict[str, Any] = {}
        self.calls: list[Call] = []
        self.outputs: list[str] = []
        self.told: list[Fact] = []
        self.revision = 0
        """Counts loads and calls: the database can only have changed when it moved."""
        self.conversation = 0
        """Counts loads (a new conversation starts a new call record)."""

    @property
    def db(self) -> Any:
        if self._db is None:
            raise RuntimeError(f"{type(self).__name__}: load a database first")
        return self._db

    def load(self, db: pydantic.BaseModel | Mapping[str, Any]) -> None:
        """Start a conversation on a private copy of ``db`` (a database or its
        ``model_dump()``, the faster to copy) with a fresh session."""
        if isinstance(db, pydantic.BaseModel):
            db = db.model_dump()
        self._db = self.database_type.model_validate(db)  # validation builds new containers
        self.session, self.calls, self.outputs, self.told = {}, [], [], []
        self.revision += 1
        self.conversation += 1

    def tools(self) -> list[FunctionTool]:
        """The marked methods as tools, bound to this backend (in definition order)."""
        if self._tools is None:
            self._tools = [
                RecordedTool(self, getattr(self, name), getattr(member, _TOOL_MARK) == "writes")
                for name, member in _members_in_order(type(self))
                if getattr(member, _TOOL_MARK, None)
            ]
        return self._tools

    @property
    def identified(self) -> bool:
        """Whether an identity check of this conversation has succeeded."""
        return self.session.get(self.identity_key) is not None

    def tell(self, fact: Fact) -> None:
        """Register a fact the policy says to tell the customer (called by a tool that did
        something: the replay of the reference actions collects the facts to grade)."""
        self.told.append(fact)

    def policy_checks(self, actions: Sequence[ToolCall]) -> tuple[ActionCheck, ...]:
        """Checks the domain's policy puts on the reference ``actions`` (over the database
        after them); none by default."""
        return ()

    def check_identity_attempts(self) -> None:
        """Refuse once the conversation has failed :data:`MAX_IDENTITY_FAILURES` identity checks
        (no guessing identities by trying them)."""
        require(
            self.session.get("identity_failures", 0) < MAX_IDENTITY_FAILURES,
            f"identity checks are locked after {MAX_IDENTITY_FAILURES} failed attempts in this "
            "conversation; the customer must contact us again",
        )

    def identity_failed(self, message: str) -> ToolError:
        """A refusal of a failed identity check, counted toward the limit."""
        failures = self.session["identity_failures"] = self.session.get("identity_failures", 0) + 1
        return ToolError(f"{message} ({MAX_IDENTITY_FAILURES - failures} attempts left)")


def _members_in_order(cls: type) -> Iterator[tuple[str, Any]]:
    seen: set[str] = set()
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            if name not in seen:
                seen.add(name)
                yield name, member


@dataclass(frozen=True)
class UserFact:
    """Something only the user knows; told when the agent asks about one of ``topics`` (a
    group of the domain's :attr:`Backend.topics`). An accepted call of a tool named in
    ``needed_by`` made before the user told this fact is a guess, and fails the episode."""

    topics: tuple[str, ...]
    text: str
    needed_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolTask:
    """What the simulated user wants, and how to check that it happened.

    ``request`` opens the conversation; ``facts`` are told only when asked; ``actions`` are
    the reference tool calls (replayed on a fresh database for grading; none that writes for
    a request the policy refuses); ``report`` are facts the agent must tell the user beside
    those the replay's tools register (what the request asks, why it cannot be done);
    ``checks`` are action checks. ``level``: 1 one action, 2 several dependent actions, 3 needs
    what only the user knows. The env completes a task at reset: ``report`` then holds every
    required fact, ``checks`` the domain's too, ``outcomes`` the reference actions' outputs,
    ``topics`` and ``vocabulary`` the domain's.
    """

    level: int
    request: str
    actions: tuple[ToolCall, ...]
    facts: tuple[UserFact, ...] = ()
    report: tuple[Fact, ...] = ()
    checks: tuple[ActionCheck, ...] = ()
    goal: str = ""
    outcomes: tuple[str, ...] = ()
    topics: tuple[tuple[str, ...], ...] = ()
    vocabulary: Vocabulary = field(default_factory=Vocabulary)


def refusal(
    level: int,
    request: str,
    identify: tuple[ToolCall, ...],
    read: ToolCall,
    attempt: ToolCall,
    why: Fact,
    *,
    facts: tuple[UserFact, ...] = (),
    goal: str = "",
) -> ToolTask:
    """A request the policy refuses. The reference actions ``identify`` the customer and
    ``read`` the record that shows why; the right end state is the database unchanged, and
    ``why`` must be told, after ``read`` (once the customer is identified) or the tool's
    refusal of ``attempt`` (its arguments: the ones that single out the request) for that
    reason: a refusal rests on the record or the tool's refusal, not on a guess from the
    request (see :class:`~.checks.Grounded`; the env fills in the reason's phrases)."""
    return ToolTask(
        level,
        request,
        (*identify, read),
        facts,
        report=(why,),
        checks=(Grounded(read, attempt, (why.value,)),),
        goal=goal,
    )


Template = Callable[[Any, np.random.Generator], "ToolTask | None"]
"""Draws a task over a database, or None when the drawn customer does not fit."""
REFUSAL_SHARE = 0.2
"""Share of tasks whose request the policy refuses (tau2: about a quarter of its tasks)."""


def draw_task(
    db: Any,
    rng: np.random.Generator,
    templates: Sequence[Template],
    refusals: Sequence[Template] = (),
    *,
    tries: int = 20,
    rounds: int = 100,
) -> ToolTask:
    """A task from a template drawn at random (one of ``refusals`` with probability
    :data:`REFUSAL_SHARE`), drawn again with fresh values until it fits the database, so every
    template is about as frequent; a template that fits nothing in ``tries`` is replaced."""
    for _ in range(rounds):
        pool = refusals if refusals and rng.random() < REFUSAL_SHARE else templates
        template = pick(rng, pool)
        for _ in range(tries):
            task = template(db, rng)
            if task is not None:
                return task
    raise RuntimeError("no task template fits this database")


def call(name: str, **arguments: Any) -> ToolCall:
    """A reference action: ``call("cancel_pending_order", order_id="#W1002", reason=...)``."""
    return ToolCall(name, arguments)


def state_hash(db: pydantic.BaseModel) -> str:
    """A canonical hash of a database: sha256 of its JSON with sorted keys, so records
    inserted in another order (two paths to one state) hash the same."""
    data = db.model_dump(mode="json")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def state_diff(before: pydantic.BaseModel, after: pydantic.BaseModel) -> list[str]:
    """Paths of the records that differ (``orders.W1002.status``), for logs and tests."""
    return sorted(_diff(before.model_dump(), after.model_dump(), ""))


def _diff(a: Any, b: Any, path: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            yield from _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    elif a != b:
        yield path


def replay(
    backend: Backend, db: pydantic.BaseModel | Mapping[str, Any], actions: Sequence[ToolCall]
) -> pydantic.BaseModel:
    """The database after the reference ``actions`` on a fresh copy of ``db``, loaded into
    ``backend``; raises if an action is refused (a task that breaks the policy is a bug)."""
    backend.load(db)
    tools = {t.name: t for t in backend.tools()}
    for action in actions:
        output = tools[action.name].call(action.arguments)
        if output.startswith("error:"):
            raise ValueError(f"reference action {action} was refused: {output}")
    return backend.db


def money(amount: float) -> str:
    """Dollars as the tools and the user write them: ``$1,234.50``."""
    return f"${amount:,.2f}"


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive pieces of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def require(condition: bool, message: str) -> None:
    """Refuse the call with ``message`` unless ``condition`` (a policy check)."""
    if not condition:
        raise ToolError(message)


def pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    """One element of ``items`` drawn from ``rng``."""
    if not items:
        raise ValueError("nothing to pick from")
    return items[int(rng.integers(len(items)))]
