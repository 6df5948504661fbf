"""The tool protocol, and tools by name (``make_tool("python", stateful=True)``); toolsets
(several tools made together, such as an MCP server's) by name too (``make_tools("mcp", ...)``)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from palaestra.tools.function import FunctionTool


@runtime_checkable
class Tool(Protocol):
    """Something an agent can call by name with JSON arguments; returns observation text.

    ``call``/``acall`` never raise for bad arguments: they return an error text that says
    what was wrong. ``reset`` starts a new episode (drops per-episode state such as a REPL).
    """

    name: str

    @property
    def schema(self) -> dict[str, Any]:
        """OpenAI-format function schema (``{"type": "function", "function": {...}}``)."""
        ...

    def call(self, arguments: dict[str, Any]) -> str: ...

    async def acall(self, arguments: dict[str, Any]) -> str: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Toolset(Protocol):
    """Several tools made together because they share something (an MCP server connection)."""

    @property
    def tools(self) -> Sequence[Tool]: ...


_tools: dict[str, str] = {
    "python": "palaestra.tools.python:PythonTool",
    "mcp": "palaestra.tools.mcp:MCPToolset",
}
_lock = threading.Lock()

ToolLike = Tool | Toolset | str | Mapping[str, Any] | Callable[..., Any]
"""A tool, a toolset, a registered name, ``{"name": <registered name>, **kwargs}``, or a plain
function (wrapped in a :class:`~palaestra.tools.function.FunctionTool`)."""


def register_tool(name: str, entry_point: str) -> None:
    """Make ``make_tool(name, **kwargs)`` build ``entry_point(**kwargs)`` (a ``"module:Name"``)."""
    if ":" not in entry_point:
        raise ValueError(f"entry point {entry_point!r} must look like 'module:Name'")
    with _lock:
        _tools[name] = entry_point


def make_tool(spec: ToolLike, **kwargs: Any) -> Tool:
    """A tool from a registered name (``"python"``), a ``{"name": ..., **kwargs}`` mapping, a
    tool object (returned as it is) or a plain function (its type hints and docstring make
    the schema). Names keep registered wrapper stacks plain data."""
    built = _build(spec, **kwargs)
    if not isinstance(built, Tool):
        raise TypeError(f"{spec!r} makes several tools; use make_tools")
    return built


def make_tools(spec: ToolLike, **kwargs: Any) -> list[Tool]:
    """What :func:`make_tool` makes, as a list; a toolset (``"mcp"``) gives all its tools."""
    built = _build(spec, **kwargs)
    return [built] if isinstance(built, Tool) else list(built.tools)


def _build(spec: ToolLike, **kwargs: Any) -> Tool | Toolset:
    if isinstance(spec, Mapping):
        options = dict(spec)
        name = options.pop("name", None)
        if not isinstance(name, str):
            raise ValueError(f'a tool given as a mapping needs a "name", got {spec!r}')
        return _build(name, **options, **kwargs)
    if not isinstance(spec, str):
        if isinstance(spec, Tool | Toolset):
            return spec
        if callable(spec):
            return FunctionTool(spec, **kwargs)
        raise TypeError(f"{type(spec).__name__} is not a tool (see palaestra.tools.Tool)")
    entry_point = _tools.get(spec)
    if entry_point is None:
        raise ValueError(f"unknown tool {spec!r}; registered tools: {sorted(_tools)}")
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)(**kwargs)
