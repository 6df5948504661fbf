"""Tools from plain Python functions: type hints and docstring make the schema.

>>> @function_tool
... def add(a: int, b: int = 0) -> int:
...     '''Add two integers.
...
...     Args:
...         a: the first term
...         b: the second term
...     '''
...     return a + b
>>> add.call({"a": 2, "b": "x"})
"error: add: argument 'b': Input should be a valid integer, unable to parse string as an integer"
>>> add.call({"a": 2, "b": 3})
'5'

The arguments model is built with pydantic, so the JSON schema the model sees and the
validation its arguments go through are the same object. A call never raises: invalid
arguments, a :class:`ToolError` the function raises to refuse (a policy the tool enforces),
or any other exception become an ``error: ...`` observation. Non-string results are sent as
JSON. Every observation a tool returns, error texts included, is capped at
``max_output_chars`` (:func:`cap`): an argument a tool echoes in its error cannot blow up the
context. Works for functions, bound methods (tools over an env's state) and ``async def``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, get_type_hints, overload

import pydantic

MAX_OUTPUT_CHARS = 8000


def cap(text: str, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` cut to ``max_chars`` characters, with a note that it was cut.

    >>> cap("x" * 10, 4)
    'xxxx\\n(output truncated)'
    """
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n(output truncated)"


def run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to completion from sync code, also when a loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def function_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-format function schema around a JSON schema of the arguments (a copy, with
    pydantic's ``title`` keys dropped and ``type``/``properties``/``required`` filled in)."""
    parameters = copy.deepcopy(parameters)
    parameters.pop("title", None)
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    for prop in parameters["properties"].values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


class ToolError(Exception):
    """Raised by a tool function to refuse a call; its message is what the agent sees."""


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and per-argument descriptions of a
    Google-style docstring (``Args:`` / ``Arguments:`` / ``Parameters:`` sections)."""
    text = inspect.cleandoc(doc or "")
    summary_lines: list[str] = []
    arguments: dict[str, str] = {}
    section = None
    current = None
    for line in text.splitlines():
        header = re.fullmatch(r"(\w+):\s*", line)
        if header and not line.startswith(" "):
            section = header.group(1).lower()
            current = None
            continue
        if section is None:
            summary_lines.append(line)
        elif section in {"args", "arguments", "parameters"}:
            entry = re.match(r"\s{1,8}(\*{0,2}\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
            if entry and len(line) - len(line.lstrip()) <= 8 and entry.group(1) not in arguments:
                current = entry.group(1).lstrip("*")
                arguments[current] = entry.group(2).strip()
            elif current and line.strip():
                arguments[current] = f"{arguments[current]} {line.strip()}".strip()
    return " ".join(part for part in (s.strip() for s in summary_lines) if part), arguments


def arguments_model(fn: Callable[..., Any], name: str) -> type[pydantic.BaseModel]:
    """A pydantic model of ``fn``'s keyword-callable parameters (extra arguments refused)."""
    _, descriptions = parse_docstring(fn.__doc__)
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args/**kwargs cannot be described by a schema")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {name!r}: positional-only parameters cannot be named in JSON")
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            annotation,
            pydantic.Field(default, description=descriptions.get(parameter.name)),
        )
    config = pydantic.ConfigDict(extra="forbid", title=name)
    return pydantic.create_model(f"{name}_arguments", __config__=config, **fields)


def describe_validation_error(name: str, error: pydantic.ValidationError) -> str:
    """One line per problem, naming the argument: what the agent needs to fix its call."""
    problems = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden":
            problems.append(f"unexpected argument {location!r}")
        elif item["type"] == "missing":
            problems.append(f"missing argument {location!r}")
        else:
            problems.append(f"argument {location!r}: {item['msg']}")
    return f"error: {name}: " + "; ".join(problems)


class FunctionTool:
    """A :class:`~palaestra.tools.Tool` that calls ``fn`` with validated JSON arguments.

    ``name`` defaults to the function's name, ``description`` to its docstring's summary.
    Stateless by itself: state lives in what ``fn`` is bound to (an env's database), so
    ``reset`` and ``close`` do nothing.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", self.name):
            raise ValueError(f"tool name {self.name!r} must be an identifier of at most 64 chars")
        summary, _ = parse_docstring(fn.__doc__)
        self.description = description if description is not None else summary
        self.max_output_chars = max_output_chars
        self.arguments = arguments_model(fn, self.name)
        self._is_async = inspect.iscoroutinefunction(fn)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        """The OpenAI-format schema (built once; treat it as read-only)."""
        return function_schema(self.name, self.description, self.arguments.model_json_schema())

    def validate(self, arguments: Any) -> dict[str, Any] | str:
        """The keyword arguments for ``fn``, or the error text the agent sees (for tools
        that subclass this one and run the call their own way)."""
        if not isinstance(arguments, dict):
            return f"error: {self.name}: arguments must be a JSON object, got {type(arguments).__name__}"
        try:
            model = self.arguments.model_validate(arguments)
        except pydantic.ValidationError as error:
            return cap(describe_validation_error(self.name, error), self.max_output_chars)
        return {field: getattr(model, field) for field in type(model).model_fields}

    def render(self, result: Any) -> str:
        """The observation for ``result``: text as it is, anything else as JSON, capped."""
        if isinstance(result, str):
            text = result
        elif isinstance(result, pydantic.BaseModel):
            text = result.model_dump_json()
        else:
            text = json.dumps(result, ensure_ascii=False, default=str)
        return cap(text, self.max_output_chars)

    def _failure(self, error: Exception) -> str:
        if isinstance(error, ToolError):
            text = f"error: {self.name}: {error}"
        else:
            text = f"error: {self.name} failed: {type(error).__name__}: {error}"
        return cap(text, self.max_output_chars)

    def call(self, arguments: dict[str, Any]) -> str:
        kwargs = self.validate(arguments)
        if isinstance(kwargs, str):
            return kwargs
        try:
            result = self.fn(**kwargs)
            if self._is_async:
                result = run_coroutine(result)
        except Exception as error:
            return self._failure(error)
        return self.render(result)

    async def acall(self, arguments: dict[str, Any]) -> str:
        kwargs = self.validate(arguments)
        if isinstance(kwargs, str):
            return kwargs
        try:
            result = self.fn(**kwargs)
            if isinstance(result, Awaitable):
                result = await result
        except Exception as error:
            return self._failure(error)
        return self.render(result)

    def reset(self) -> None:
        """Nothing to drop: the function's state belongs to whatever it is bound to."""

    def close(self) -> None:
        """Nothing to free."""


@overload
def function_tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def function_tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a :class:`FunctionTool`: ``@function_tool`` or ``@function_tool(name="...")``."""
    if fn is not None:
        return FunctionTool(fn, name=name, description=description)
    return lambda f: FunctionTool(f, name=name, description=description)
