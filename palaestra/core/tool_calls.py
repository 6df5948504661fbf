"""The default tool-call text format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

This is the Hermes / Qwen convention. Parsing is pure and linear-time; malformed calls are
reported, never raised, so an env can turn them into a clear observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedToolCalls:
    """The calls found in an action, and a message per block that could not be read."""

    calls: list[ToolCall]
    errors: list[str]


def parse_tool_calls(text: str) -> ParsedToolCalls:
    """Every ``<tool_call>...</tool_call>`` block in ``text``, in order.

    >>> parse_tool_calls('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>').calls
    [ToolCall(name='python', arguments={'code': '1'})]
    """
    calls, errors = [], []
    for match in _BLOCK.finditer(text):
        call, error = _parse_block(match.group(1))
        if call is not None:
            calls.append(call)
        else:
            errors.append(error)
    return ParsedToolCalls(calls, errors)


def _parse_block(body: str) -> tuple[ToolCall | None, str]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"tool call is not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None, 'tool call must be a JSON object with a string "name"'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, f'"arguments" of {data["name"]!r} is a string that is not JSON'
    if not isinstance(arguments, dict):
        return None, f'"arguments" of {data["name"]!r} must be a JSON object'
    return ToolCall(data["name"], arguments), ""


def format_tool_call(call: ToolCall) -> str:
    """The text form of ``call`` (what a model writes; inverse of :func:`parse_tool_calls`)."""
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{OPEN_TAG}{body}{CLOSE_TAG}"
