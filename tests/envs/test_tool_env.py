from __future__ import annotations

import asyncio

import pytest

import palaestra
from palaestra.core.messages import without_reasoning
from palaestra.core.tool_calls import ToolCall, format_tool_call
from palaestra.envs.tool_env import ToolEnv
from palaestra.sandboxes import LocalSandbox
from palaestra.tools import FunctionTool
from palaestra.tools.python import PythonTool


@pytest.fixture(scope="module")
def box():
    with LocalSandbox(pool_size=2) as sandbox:
        yield sandbox


def python_call(code: str) -> str:
    return format_tool_call(ToolCall("python", {"code": code}))


def test_python_tool_results_are_tool_observations(box: LocalSandbox) -> None:
    env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [PythonTool(box)])
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(python_call("print(sum(range(10)))"))
    assert obs == "45" and info["role"] == "tool" and reward == 0.0
    assert not terminated and not truncated
    obs, *_ = env.step(python_call("1/0"))
    assert "ZeroDivisionError" in obs and "exited with status 1" in obs
    obs, _, _, _, info = env.step("\\boxed{25}")  # no tool call: the game's own action
    assert info["role"] == "user" and ("too" in obs or "Correct" in obs)


def test_stateful_tool_keeps_variables_within_an_episode(box: LocalSandbox) -> None:
    env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [PythonTool(box, stateful=True)])
    env.reset(seed=0)
    env.step(python_call("x = 7"))
    assert env.step(python_call("print(x * 6)"))[0] == "42"
    env.reset(seed=1)
    assert "NameError" in env.step(python_call("print(x)"))[0]
    env.close()


def test_bad_calls_and_tool_budget(box: LocalSandbox) -> None:
    env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [PythonTool(box)], max_tool_turns=1)
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "shell", "arguments": {}}</tool_call>')
    assert "unknown tool 'shell'" in obs
    obs, _, _, _, info = env.step(python_call("print(1)"))
    assert "no tool calls left" in obs and info["role"] == "tool"
    env.reset(seed=0)
    obs, *_ = env.step("<tool_call>{oops</tool_call>")
    assert "not valid JSON" in obs


def test_schema_prompt_and_async(box: LocalSandbox) -> None:
    env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [PythonTool(box)])
    assert env.tools[-1]["function"]["name"] == "python"
    assert "<tool_call>" in env.system_prompt and "guessing game" in env.system_prompt

    async def episode() -> str:
        await env.areset(seed=0)
        return (await env.astep(python_call("print('async')")))[0]

    assert asyncio.run(episode()) == "async"


def test_output_is_truncated_for_the_observation(box: LocalSandbox) -> None:
    tool = PythonTool(box, max_output_chars=100)
    text = tool.call({"code": "print('y' * 5000)"})
    assert text.endswith("(output truncated)") and len(text) < 150
    assert tool.call({"source": "1"}) == (
        "error: python: missing argument 'code'; unexpected argument 'source'"
    )


def test_tool_calls_inside_reasoning_are_not_made() -> None:
    """A call written in a ``<think>`` block (closed, unclosed, or before a ``</think>`` that
    the prompt opened) is reasoning, not an action; the same call after the block runs."""
    made: list[str] = []

    def note(text: str) -> str:
        """Note something down.

        Args:
            text: what to note.
        """
        made.append(text)
        return "noted"

    for format in ("hermes", "tags", "llama"):
        env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [FunctionTool(note)], format=format)
        call = env.format.format(ToolCall("note", {"text": "x"}), env.own_tools)
        for action in (
            f"<think>I could {call}</think>\\boxed{{25}}",
            f"<think>I could write {call}",
            f"<THINK>\n{call}\n</THINK>",
            f"the prompt opened the block: {call}</think>\\boxed{{25}}",
        ):
            env.reset(seed=0)
            info = env.step(action)[4]
            assert info["role"] == "user" and made == [], (format, action)
        env.reset(seed=0)
        info = env.step(f"<think>Let me note it.</think>{call}")[4]
        assert info["role"] == "tool" and made == ["x"], format
        made.clear()


@pytest.mark.parametrize(
    "env_id",
    ["tools:Shop-v0", "sql:Flights-Tools-v0", "sql:Flights-SQLTag-v0", "search:Synthetic-v0"],
)
def test_every_tool_env_ignores_calls_in_reasoning(env_id: str) -> None:
    """The families' tool variants read calls through ``ToolEnv``: the oracle's first call,
    inside reasoning, does not run; after it, it does."""
    env = palaestra.make(env_id)
    observation, _ = env.reset(seed=0)
    first = without_reasoning(env.oracle()(observation))
    assert env.step(f"<think>Let me look.</think>\n{first}")[4]["role"] == "tool"
    for action in (f"<think>I might {first}</think>Hello.", f"<think>I might {first}"):
        env.reset(seed=0)
        assert env.step(action)[4]["role"] != "tool", action
