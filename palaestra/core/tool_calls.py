"""Tool-call text formats: how a model writes a call in its action, and how envs read it.

A format is a small protocol (:class:`ToolCallFormat`): ``parse`` finds the calls in an
action, ``format`` writes one call (the only serializer: a call renders to the same bytes
everywhere), ``instructions`` tells the model how to call the given tools. Formats are
registered by name; :func:`tool_format` looks one up, :func:`register_tool_format` adds one.

* ``hermes`` (default): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes,
  Qwen and most open chat templates); it also reads ``"parameters"`` for ``"arguments"`` and
  an action that is one bare Llama-style JSON call;
* ``llama``: the action is ``{"name": ..., "parameters": {...}}`` (Llama 3.1 JSON tool calls,
  ``<|python_tag|>`` accepted), several separated by new lines or ``;``;
* ``tags``: ``<python>code</python>``, ``<search>query</search>``, ``<sql>query</sql>``: the
  tool's name as the tag and the content as its one string argument (Search-R1, ToRL);
* ``fenced``: a fenced ```` ```python ```` block is a call of the ``python`` tool.

Parsing is pure and linear-time; malformed calls are reported, never raised, so an env can
turn them into a clear observation.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_HERMES_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
_FENCED_BLOCK = re.compile(r"```(?:python|py|python3)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


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

    def __bool__(self) -> bool:
        """Whether the action tried to call a tool at all (well-formed or not)."""
        return bool(self.calls or self.errors)


def tool_name(schema: dict[str, Any]) -> str:
    """The name in an OpenAI-format function schema."""
    return str(schema.get("function", schema).get("name", ""))


def tool_description(schema: dict[str, Any]) -> str:
    """The description in an OpenAI-format function schema."""
    return str(schema.get("function", schema).get("description", ""))


def string_parameter(schema: dict[str, Any]) -> str | None:
    """The name of the tool's only required string parameter, else None (tag formats need one)."""
    parameters = schema.get("function", schema).get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or list(properties)
    if len(required) == 1 and properties.get(required[0], {}).get("type") == "string":
        return str(required[0])
    return None


def dump_arguments(arguments: dict[str, Any]) -> str:
    """Arguments as JSON text: the one encoding every palaestra message and request uses."""
    return json.dumps(arguments, ensure_ascii=False)


@runtime_checkable
class ToolCallFormat(Protocol):
    """How calls are written in an action. ``tools`` are OpenAI-format function schemas."""

    name: str

    def parse(self, text: str, tools: Sequence[dict[str, Any]]) -> ParsedToolCalls:
        """Every call in ``text``, in order, plus a message per malformed one."""
        ...

    def format(self, call: ToolCall, tools: Sequence[dict[str, Any]]) -> str:
        """The text a model writes for ``call`` (inverse of :meth:`parse`)."""
        ...

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        """System-prompt text that explains how to call ``tools``."""
        ...


def _tool_list(tools: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"- {tool_name(t)}: {tool_description(t)}" for t in tools)


class HermesFormat:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, several per action."""

    name = "hermes"

    def parse(self, text: str, tools: Sequence[dict[str, Any]] = ()) -> ParsedToolCalls:
        """The blocks' calls; an action that is one bare Llama-style JSON call (no blocks) is
        read as that call."""
        calls, errors = [], []
        for match in _HERMES_BLOCK.finditer(text):
            call, error = _parse_json_call(match.group(1))
            if call is not None:
                calls.append(call)
            else:
                errors.append(error)
        if not calls and not errors:
            return LlamaJsonFormat().parse(text, tools)
        return ParsedToolCalls(calls, errors)

    def format(self, call: ToolCall, tools: Sequence[dict[str, Any]] = ()) -> str:
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        return f"{OPEN_TAG}{body}{CLOSE_TAG}"

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        return (
            'You can call tools. To call one, write <tool_call>{"name": <tool name>, '
            '"arguments": <JSON object>}</tool_call>; several calls may follow each other. '
            "The results come back in the next message. When you are done with tools, answer "
            f"without a tool call. Tools:\n{_tool_list(tools)}"
        )


def _parse_json_call(body: str) -> tuple[ToolCall | None, str]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"tool call is not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None, 'tool call must be a JSON object with a string "name"'
    arguments = data.get("arguments", data.get("parameters", {}))  # Llama: "parameters"
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, f'"arguments" of {data["name"]!r} is a string that is not JSON'
    if not isinstance(arguments, dict):
        return None, f'"arguments" of {data["name"]!r} must be a JSON object'
    return ToolCall(data["name"], arguments), ""


class LlamaJsonFormat:
    """An action that is one JSON call, ``{"name": ..., "parameters": {...}}`` (Llama 3.1's
    JSON tool calling; ``<|python_tag|>`` before it and ``"arguments"`` for ``"parameters"``
    are accepted), or several separated by ``;`` or new lines. Text around the JSON makes the
    action a message, not a call."""

    name = "llama"

    def parse(self, text: str, tools: Sequence[dict[str, Any]] = ()) -> ParsedToolCalls:
        body = text.strip().removeprefix(PYTHON_TAG).strip()
        named = '"name"' in body and ('"parameters"' in body or '"arguments"' in body)
        if not (body.startswith("{") and body.endswith("}") and named):
            return ParsedToolCalls([], [])
        calls, errors = [], []
        for part in _JSON_CALLS.split(body):
            call, error = _parse_json_call(part)
            if call is not None:
                calls.append(call)
            else:
                errors.append(f"{error}; write each call as {LLAMA_EXAMPLE}")
        return ParsedToolCalls(calls, errors)

    def format(self, call: ToolCall, tools: Sequence[dict[str, Any]] = ()) -> str:
        return json.dumps({"name": call.name, "parameters": call.arguments}, ensure_ascii=False)

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        return (
            f"You can call tools. To call one, answer with only {LLAMA_EXAMPLE}; several calls "
            "go on separate lines. The results come back in the next message. When you are "
            f"done with tools, answer in plain text. Tools:\n{_tool_list(tools)}"
        )


PYTHON_TAG = "<|python_tag|>"
LLAMA_EXAMPLE = '{"name": <tool name>, "parameters": <JSON object>}'
_JSON_CALLS = re.compile(r"(?<=\})\s*(?:;|\n)\s*(?=\{)")


class TagFormat:
    """``<name>content</name>`` for each tool with one string parameter (Search-R1, ToRL).

    The tag is the tool's name; the content, stripped of surrounding blank lines, is the
    value of its one required string parameter. Tools with other signatures cannot be called
    in this format (:meth:`instructions` says so; such tools should use ``hermes``).
    """

    name = "tags"

    def parse(self, text: str, tools: Sequence[dict[str, Any]]) -> ParsedToolCalls:
        parameters = {tool_name(t): string_parameter(t) for t in tools}
        names = [n for n, p in parameters.items() if p is not None]
        if not names:
            return ParsedToolCalls([], [])
        pattern = _tag_pattern(tuple(names))
        calls, errors = [], []
        for match in pattern.finditer(text):
            name, content, closing = match.group(1), match.group(2), match.group(3)
            if closing is None:
                errors.append(f"<{name}> is not closed with </{name}>")
                continue
            calls.append(ToolCall(name, {parameters[name]: content.strip("\n")}))
        return ParsedToolCalls(calls, errors)

    def format(self, call: ToolCall, tools: Sequence[dict[str, Any]]) -> str:
        schema = next((t for t in tools if tool_name(t) == call.name), None)
        parameter = None if schema is None else string_parameter(schema)
        if parameter is None or set(call.arguments) != {parameter}:
            raise ValueError(
                f"{call.name!r} cannot be written as a tag: it needs one string argument"
            )
        return f"<{call.name}>{call.arguments[parameter]}</{call.name}>"

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        lines = []
        for t in tools:
            name, parameter = tool_name(t), string_parameter(t)
            if parameter is not None:
                lines.append(f"- <{name}>{parameter}</{name}>: {tool_description(t)}")
        return (
            "You can call tools by writing a tag with the tool's input between the tags; "
            "the result comes back in the next message. When you are done with tools, answer "
            "without a tool tag. Tools:\n" + "\n".join(lines)
        )


@functools.lru_cache(maxsize=64)
def _tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """Opening tag of any of ``names``, its content, and the matching closing tag if any."""
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"<({alternatives})>(.*?)(?:(</\1>)|(?=<(?:{alternatives})>)|\Z)", re.DOTALL)


class FencedFormat:
    """A fenced ```` ```python ```` block is a call of the ``python`` tool (code interpreters).

    Only the ``python`` tool can be called this way; an action with no block is the answer.
    """

    name = "fenced"
    tool = "python"

    def parse(self, text: str, tools: Sequence[dict[str, Any]]) -> ParsedToolCalls:
        schema = next((t for t in tools if tool_name(t) == self.tool), None)
        parameter = None if schema is None else string_parameter(schema)
        if parameter is None:
            return ParsedToolCalls([], [])
        calls = [ToolCall(self.tool, {parameter: code}) for code in _FENCED_BLOCK.findall(text)]
        return ParsedToolCalls(calls, [])

    def format(self, call: ToolCall, tools: Sequence[dict[str, Any]]) -> str:
        if call.name != self.tool or len(call.arguments) != 1:
            raise ValueError(f"only the {self.tool} tool can be written as a fenced block")
        code = str(next(iter(call.arguments.values())))
        return f"```python\n{code.rstrip()}\n```"

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        return (
            "You can run Python: write a ```python fenced block``` and its output comes back "
            "in the next message (use print() to see values). When you are done, answer "
            "without a code block."
        )


_formats: dict[str, ToolCallFormat] = {}
_formats_lock = threading.Lock()

DEFAULT_FORMAT = "hermes"


def register_tool_format(fmt: ToolCallFormat, *, override: bool = False) -> None:
    """Make ``fmt`` available by its name (for ``ToolEnv(..., format=name)``)."""
    with _formats_lock:
        if fmt.name in _formats and not override:
            raise ValueError(f"tool-call format {fmt.name!r} is already registered")
        _formats[fmt.name] = fmt


def tool_format(name: str | ToolCallFormat = DEFAULT_FORMAT) -> ToolCallFormat:
    """The registered format called ``name`` (a format object is returned as it is)."""
    if not isinstance(name, str):
        return name
    found = _formats.get(name)
    if found is None:
        raise ValueError(f"unknown tool-call format {name!r}; choose one of {sorted(_formats)}")
    return found


for _fmt in (HermesFormat(), LlamaJsonFormat(), TagFormat(), FencedFormat()):
    register_tool_format(_fmt)


def parse_tool_calls(text: str) -> ParsedToolCalls:
    """Every ``<tool_call>...</tool_call>`` block in ``text``, in order (the default format).

    >>> parse_tool_calls('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>').calls
    [ToolCall(name='python', arguments={'code': '1'})]
    """
    return _formats[DEFAULT_FORMAT].parse(text, ())


def strip_tool_calls(text: str) -> str:
    """``text`` without its default-format call blocks (the prose around them)."""
    return _HERMES_BLOCK.sub("", text).strip()


def format_tool_call(call: ToolCall) -> str:
    """The default-format text of ``call`` (what a model writes; inverse of :func:`parse_tool_calls`)."""
    return _formats[DEFAULT_FORMAT].format(call, ())
