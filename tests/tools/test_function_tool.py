"""Tools from plain functions: schema from hints and docstring, validation, errors as text."""

from __future__ import annotations

import json
from typing import Literal

import pytest

import palaestra
from palaestra.core.tool_calls import ToolCall, tool_format
from palaestra.envs.tool_env import MAX_CALLS_PER_ACTION, ToolEnv
from palaestra.tools import FunctionTool, ToolError, function_tool, make_tool
from palaestra.tools.function import parse_docstring


def transfer(account: str, amount: float, currency: Literal["EUR", "USD"] = "EUR") -> dict:
    """Move money out of an account.

    Args:
        account: the account id, e.g. "A-17"
        amount: how much to move; must be
            positive
        currency: the currency code

    Returns:
        the new balance
    """
    if amount <= 0:
        raise ToolError("amount must be positive")
    return {"account": account, "moved": amount, "currency": currency}


def test_schema_comes_from_hints_and_docstring():
    schema = FunctionTool(transfer).schema
    function = schema["function"]
    assert schema["type"] == "function"
    assert function["name"] == "transfer"
    assert function["description"] == "Move money out of an account."
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["account", "amount"]
    assert parameters["additionalProperties"] is False
    props = parameters["properties"]
    assert props["account"] == {"type": "string", "description": 'the account id, e.g. "A-17"'}
    assert props["amount"]["type"] == "number"
    assert props["amount"]["description"] == "how much to move; must be positive"
    assert props["currency"]["enum"] == ["EUR", "USD"]
    assert props["currency"]["default"] == "EUR"
    json.dumps(schema)  # plain JSON, ready for a chat template or an API


def test_valid_call_returns_json_and_coerces_like_pydantic():
    tool = FunctionTool(transfer)
    out = tool.call({"account": "A-1", "amount": "2.5"})
    assert json.loads(out) == {"account": "A-1", "moved": 2.5, "currency": "EUR"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"amount": 1}, "missing argument 'account'"),
        ({"account": "A", "amount": "lots"}, "argument 'amount': Input should be a valid number"),
        ({"account": "A", "amount": 1, "currency": "BTC"}, "argument 'currency'"),
        ({"account": "A", "amount": 1, "sudo": True}, "unexpected argument 'sudo'"),
        (["A", 1], "arguments must be a JSON object, got list"),
        ("A", "arguments must be a JSON object, got str"),
        ({"account": "A", "amount": -1}, "error: transfer: amount must be positive"),
    ],
)
def test_bad_calls_are_error_observations(arguments, expected):
    out = FunctionTool(transfer).call(arguments)
    assert out.startswith("error: transfer")
    assert expected in out


def test_unexpected_exception_is_an_observation_not_a_crash():
    def broken(x: int) -> int:
        """Divide."""
        return 1 // x

    out = FunctionTool(broken).call({"x": 0})
    assert out == "error: broken failed: ZeroDivisionError: integer division or modulo by zero"


async def test_async_functions_and_bound_methods():
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def bump(self, by: int = 1) -> int:
            """Add to the counter."""
            self.n += by
            return self.n

    counter = Counter()
    tool = function_tool(counter.bump)
    assert "self" not in tool.schema["function"]["parameters"]["properties"]
    assert tool.call({"by": 2}) == "2"
    assert await tool.acall({}) == "3"

    @function_tool(name="lookup", description="Find a word.")
    async def find(word: str) -> str:
        return word.upper()

    assert find.name == "lookup" and find.schema["function"]["description"] == "Find a word."
    assert await find.acall({"word": "hi"}) == "HI"
    assert find.call({"word": "hi"}) == "HI"  # the sync path runs the coroutine


def test_long_output_is_truncated():
    tool = FunctionTool(lambda n: "x" * n, name="spam", max_output_chars=100)
    out = tool.call({"n": 10_000})
    assert len(out) < 130 and out.endswith("(output truncated)")


def test_error_texts_are_capped_like_results():
    """A tool that echoes its argument in a refusal, an unexpected exception or a validation
    error that names a huge key: the observation stays under the cap."""

    def lookup(key: str) -> str:
        raise ToolError(f"no record {key!r}")

    def crash(key: str) -> str:
        raise KeyError(key)

    huge = "k" * 1_000_000
    for fn in (lookup, crash):
        out = FunctionTool(fn, max_output_chars=100).call({"key": huge})
        assert out.startswith("error:") and out.endswith("(output truncated)") and len(out) < 130
    out = FunctionTool(lookup, max_output_chars=100).call({"key": "a", huge: 1})
    assert out.startswith("error: lookup: unexpected argument") and len(out) < 130


def test_signatures_a_schema_cannot_describe_are_refused():
    def varargs(*items: int) -> int:
        return 0

    with pytest.raises(TypeError, match=r"\*args"):
        FunctionTool(varargs)
    with pytest.raises(ValueError, match="tool name"):
        FunctionTool(transfer, name="no spaces allowed")


def test_make_tool_wraps_plain_functions():
    tool = make_tool(transfer)
    assert isinstance(tool, FunctionTool) and tool.name == "transfer"


def test_docstring_parser_ignores_other_sections():
    summary, arguments = parse_docstring(transfer.__doc__)
    assert summary == "Move money out of an account."
    assert set(arguments) == {"account", "amount", "currency"}


def _tool_env() -> ToolEnv:
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    return ToolEnv(palaestra.make("math:Arithmetic-v0"), [multiply])


def test_tool_env_runs_function_tools_and_survives_hostile_calls():
    env = _tool_env()
    env.reset(seed=0)
    hermes = tool_format("hermes")
    good = hermes.format(ToolCall("multiply", {"a": 6, "b": 7}), env.tools)
    obs, _, terminated, truncated, info = env.step(good)
    assert obs == "42" and info["role"] == "tool" and not (terminated or truncated)

    hostile = [
        hermes.format(ToolCall("multiply", {"a": "six", "b": 7}), env.tools),
        hermes.format(ToolCall("multiply", {"a": 6}), env.tools),
        hermes.format(ToolCall("rm_rf", {}), env.tools),
        "<tool_call>{not json</tool_call>",
        "<tool_call>[1, 2]</tool_call>",
        '<tool_call>{"name": "multiply", "arguments": "a=1"}</tool_call>',
    ]
    for action in hostile:
        env.reset(seed=0)
        obs, _, terminated, truncated, info = env.step(action)
        assert info["role"] == "tool" and obs.startswith("error") and not terminated, action


def test_one_hundred_calls_in_one_action():
    env = _tool_env()
    env.reset(seed=0)
    call = tool_format("hermes").format(ToolCall("multiply", {"a": 2, "b": 3}), env.tools)
    _, _, _, _, info = env.step("\n".join([call] * 100))
    outputs = info["tool_outputs"]
    assert len(outputs) == 100
    assert outputs[:MAX_CALLS_PER_ACTION] == ["6"] * MAX_CALLS_PER_ACTION
    assert all(out.startswith("error: at most") for out in outputs[MAX_CALLS_PER_ACTION:])
