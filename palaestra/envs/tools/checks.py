"""Action checks: policy rules the tools cannot enforce, graded on the calls the agent made.

As in tau2-bench, a task can carry checks over the conversation's tool calls (each recorded
with its arguments and whether the tool accepted it):

* :class:`Required`: some accepted call matches;
* :class:`Forbidden`: no call matches, accepted or refused (trying counts);
* :class:`Before`: every accepted call matching ``then`` comes after an accepted call matching
  ``first`` (look up the free slots before booking one, read the transactions before
  disputing one: a policy that guesses ids from their pattern fails);
* :class:`Grounded`: a refusal rests on the record that shows why (an accepted read made once
  the customer was identified) or on the tool's own refusal for that reason, not on a guess
  from the request, a call with missing arguments or a locked identity check.

A call matches a check's call when it names the same tool and every argument the check gives
is equal (strings compared stripped, numbers to 1e-6, lists element by element); arguments the
check leaves out may be anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.facts import has_phrase, plain


@dataclass(frozen=True)
class Call:
    """A tool call the agent made: its arguments as sent, whether the tool accepted it,
    whether a customer had been identified when it was made, and what the tool answered."""

    name: str
    arguments: Mapping[str, Any]
    accepted: bool
    writes: bool
    identified: bool = True
    output: str = ""


class ActionCheck(Protocol):
    def problem(self, calls: Sequence[Call]) -> str | None:
        """Why ``calls`` break the rule, or None."""
        ...


def matches(check: ToolCall, call: Call) -> bool:
    """Whether ``call`` is ``check``'s tool with ``check``'s arguments (others may differ)."""
    return check.name == call.name and all(
        key in call.arguments and _normal(call.arguments[key]) == _normal(value)
        for key, value in check.arguments.items()
    )


def _normal(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return round(float(value), 6)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list | tuple):
        return tuple(_normal(item) for item in value)
    return str(value)


def describe(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={value!r}" for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


@dataclass(frozen=True)
class Required:
    """An accepted call matching ``call`` must be made."""

    call: ToolCall

    def problem(self, calls: Sequence[Call]) -> str | None:
        if any(c.accepted and matches(self.call, c) for c in calls):
            return None
        return f"required {describe(self.call)} was not made"


@dataclass(frozen=True)
class Forbidden:
    """No call matching ``call`` may be made, not even one the tool refuses."""

    call: ToolCall

    def problem(self, calls: Sequence[Call]) -> str | None:
        if any(matches(self.call, c) for c in calls):
            return f"forbidden {describe(self.call)} was called"
        return None


@dataclass(frozen=True)
class Grounded:
    """A refusal rests on what shows why: an accepted ``read`` made once the customer was
    identified, or ``attempt`` refused by the tool with a message that states the reason (one
    of the ``reason`` phrases). Nothing else grounds it: a call with missing arguments, one
    made before identification, one refused for another reason (a locked identity check)."""

    read: ToolCall
    attempt: ToolCall
    reason: tuple[str, ...]

    def grounds(self, call: Call) -> bool:
        """Whether ``call`` shows why the request is refused."""
        if not call.identified:
            return False
        if call.accepted:
            return matches(self.read, call)
        return matches(self.attempt, call) and has_phrase(plain(call.output), self.reason)

    def problem(self, calls: Sequence[Call]) -> str | None:
        if any(self.grounds(call) for call in calls):
            return None
        return (
            f"neither {describe(self.read)} after identification nor {describe(self.attempt)} "
            "refused for the reason was made"
        )


@dataclass(frozen=True)
class Before:
    """Every accepted call matching ``then`` follows an accepted call matching ``first``."""

    first: ToolCall
    then: ToolCall

    def problem(self, calls: Sequence[Call]) -> str | None:
        ready = False
        for call in calls:
            if call.accepted and matches(self.then, call) and not ready:
                return f"{describe(self.then)} came before {describe(self.first)}"
            ready = ready or (call.accepted and matches(self.first, call))
        return None
