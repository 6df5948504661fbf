"""The tool protocol, and tools by name (``make_tool("python", stateful=True)``)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
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


_tools: dict[str, str] = {"python": "palaestra.tools.python:PythonTool"}
_lock = threading.Lock()

ToolLike = Tool | str | Mapping[str, Any] | Callable[..., Any]
"""A tool, a registered tool name, ``{"name": <registered name>, **kwargs}``, or a plain
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
    if isinstance(spec, Mapping):
        options = dict(spec)
        name = options.pop("name", None)
        if not isinstance(name, str):
            raise ValueError(f'a tool given as a mapping needs a "name", got {spec!r}')
        return make_tool(name, **options, **kwargs)
    if not isinstance(spec, str):
        if not isinstance(spec, Tool) and callable(spec):
            return FunctionTool(spec, **kwargs)
        if not isinstance(spec, Tool):
            raise TypeError(f"{type(spec).__name__} is not a tool (see palaestra.tools.Tool)")
        return spec
    entry_point = _tools.get(spec)
    if entry_point is None:
        raise ValueError(f"unknown tool {spec!r}; registered tools: {sorted(_tools)}")
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)(**kwargs)
