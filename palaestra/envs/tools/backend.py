"""Stateful backends, tasks over them, and grading by final database state (tau2's way).

A :class:`Backend` holds one episode's database (a pydantic model) and the session of the
conversation (who has proved their identity); its methods marked :func:`tool` are the
agent's tools, and they enforce the domain's policies by raising
:class:`~palaestra.tools.ToolError` (no refund of an order that was not returned, no account
change before an identity check). A :class:`ToolTask` is what a simulated user wants: the
opening request, what only the user knows (told when asked), the reference actions, and the
facts the agent must tell the user.

Grading (:func:`replay`, :func:`state_hash`): the reference actions are replayed on a
fresh copy of the database; an episode succeeds when its final database hashes the same as
that replay (any path to the same end state passes; the right action on the wrong item or
one extra side effect fails) and every required fact appears in the agent's messages to the
user.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
import pydantic

from palaestra.core.tool_calls import ToolCall
from palaestra.tools import FunctionTool, ToolError

Database = TypeVar("Database", bound=pydantic.BaseModel)

_TOOL_MARK = "__palaestra_tool__"


def tool(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a :class:`Backend` method as a tool (its hints and docstring make the schema)."""
    setattr(method, _TOOL_MARK, True)
    return method


class Backend:
    """One domain's database and conversation session; its :func:`tool` methods are the tools.

    Subclasses set ``name``, ``company``, ``policy`` (the document the agent reads),
    ``database_type``, and the domain's generators: ``generate = staticmethod(...)`` (a
    database from an ``np.random.Generator``) and ``generate_task = staticmethod(...)`` (a
    :class:`ToolTask` of a level, 1 to 3, over a database, drawn from a generator).
    """

    name: ClassVar[str]
    company: ClassVar[str]
    policy: ClassVar[str]
    database_type: ClassVar[type[pydantic.BaseModel]]
    generate: ClassVar[Callable[[np.random.Generator], pydantic.BaseModel]]
    generate_task: ClassVar[Callable[[Any, np.random.Generator, int], ToolTask]]

    def __init__(self) -> None:
        self._db: pydantic.BaseModel | None = None
        self._tools: list[FunctionTool] | None = None
        self.session: dict[str, Any] = {}

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
        self.session = {}

    def tools(self) -> list[FunctionTool]:
        """The marked methods as tools, bound to this backend (in definition order)."""
        if self._tools is None:
            self._tools = [
                FunctionTool(getattr(self, name))
                for name, member in _members_in_order(type(self))
                if getattr(member, _TOOL_MARK, False)
            ]
        return self._tools


def _members_in_order(cls: type) -> Iterator[tuple[str, Any]]:
    seen: set[str] = set()
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            if name not in seen:
                seen.add(name)
                yield name, member


@dataclass(frozen=True)
class UserFact:
    """Something only the user knows; told when an agent's message mentions one of ``topics``."""

    topics: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class ToolTask:
    """What the simulated user wants, and how to check that it happened.

    ``request`` opens the conversation; ``facts`` are told only when asked; ``actions`` are
    the reference tool calls (replayed on a fresh database for grading); ``report`` are
    texts the agent must say to the user (an amount, a date), and ``report_question`` is how
    the user asks for them. ``level``: 1 one action, 2 several dependent actions, 3 needs
    what only the user knows.
    """

    level: int
    request: str
    actions: tuple[ToolCall, ...]
    facts: tuple[UserFact, ...] = ()
    report: tuple[str, ...] = ()
    report_question: str = ""
    goal: str = ""


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


_SEPARATORS = re.compile(r"[^a-z0-9$.,:@#-]+")


def words(text: str) -> list[str]:
    """Lowercase words of ``text``, trailing punctuation dropped (``"$42.50."`` -> ``"$42.50"``)."""
    stripped = (word.rstrip(".,:-") for word in _SEPARATORS.split(text.lower()))
    return [word for word in stripped if word]


def mentions(text: str, phrase: str) -> bool:
    """Whether ``phrase`` appears in ``text`` as whole words (case and punctuation ignored).

    >>> mentions("Your refund is $42.50.", "$42.50"), mentions("$142.50", "$42.50")
    (True, False)
    """
    needle, haystack = words(phrase), words(text)
    size = len(needle)
    return bool(needle) and any(
        haystack[i : i + size] == needle for i in range(len(haystack) - size + 1)
    )


def money(amount: float) -> str:
    """Dollars as the tools and the user write them: ``$1,234.50``."""
    return f"${amount:,.2f}"


def require(condition: bool, message: str) -> None:
    """Refuse the call with ``message`` unless ``condition`` (a policy check)."""
    if not condition:
        raise ToolError(message)


def pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    """One element of ``items`` drawn from ``rng``."""
    if not items:
        raise ValueError("nothing to pick from")
    return items[int(rng.integers(len(items)))]
