"""Add tools to any env: actions with ``<tool_call>`` blocks run tools, others go to the env.

>>> env = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [PythonTool()])  # doctest: +SKIP

Tool results come back as the observation with ``info["role"] == "tool"``, reward 0 and the
episode still running; an action without tool calls is the env's own action. Malformed
calls get an explanatory tool observation. Tool turns count toward ``max_tool_turns``; past
it, a tool call gets a reminder to answer instead.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from palaestra.core.env import ResetResult, StepResult
from palaestra.core.tool_calls import ToolCall, parse_tool_calls


@runtime_checkable
class Tool(Protocol):
    """Something an agent can call by name with JSON arguments; returns observation text."""

    name: str

    @property
    def schema(self) -> dict[str, Any]:
        """OpenAI-format function schema (``{"type": "function", "function": {...}}``)."""
        ...

    def call(self, arguments: dict[str, Any]) -> str: ...

    async def acall(self, arguments: dict[str, Any]) -> str: ...

    def reset(self) -> None:
        """Start of a new episode (drop per-episode state such as a REPL)."""
        ...

    def close(self) -> None: ...


TOOL_INSTRUCTIONS = (
    'You can call tools. To call one, write <tool_call>{{"name": <tool name>, "arguments": '
    "<JSON object>}}</tool_call>; the result comes back in the next message. "
    "When you are done with tools, answer without a tool call. Tools:\n{descriptions}"
)


class ToolEnv(gym.Wrapper[str, str, str, str]):
    """Wrap ``env`` so the agent may call ``tools`` before (or between) its own actions."""

    def __init__(self, env: gym.Env[str, str], tools: list[Tool], *, max_tool_turns: int = 8):
        if not tools:
            raise ValueError("ToolEnv needs at least one tool, e.g. ToolEnv(env, [PythonTool()])")
        if max_tool_turns < 1:
            raise ValueError(f"max_tool_turns must be >= 1, got {max_tool_turns}")
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        super().__init__(env)
        self.tool_map = {tool.name: tool for tool in tools}
        self.max_tool_turns = max_tool_turns
        self._tool_turns = 0
        low, high = getattr(env.unwrapped, "reward_range", (0.0, 1.0))
        self._tool_reward = min(max(0.0, low), high)

    @property
    def tools(self) -> list[dict[str, Any]]:
        inner = getattr(self.env.unwrapped, "tools", [])
        return [*inner, *(tool.schema for tool in self.tool_map.values())]

    @property
    def system_prompt(self) -> str:
        descriptions = "\n".join(
            f"- {tool.name}: {tool.schema['function']['description']}"
            for tool in self.tool_map.values()
        )
        instructions = TOOL_INSTRUCTIONS.format(descriptions=descriptions)
        inner = getattr(self.env.unwrapped, "system_prompt", None)
        return f"{inner}\n\n{instructions}" if inner else instructions

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._tool_turns = 0
        for tool in self.tool_map.values():
            tool.reset()
        return self.env.reset(seed=seed, options=options)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._tool_turns = 0
        for tool in self.tool_map.values():
            tool.reset()
        areset = getattr(self.env, "areset", None)
        if areset is None:
            return await asyncio.to_thread(self.env.reset, seed=seed, options=options)
        return await areset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        parsed = parse_tool_calls(action)
        if not parsed.calls and not parsed.errors:
            return self.env.step(action)
        results = [
            self.tool_map[call.name].call(call.arguments) if self._callable(call) else None
            for call in parsed.calls
        ]
        return self._tool_step(parsed.calls, results, parsed.errors)

    async def astep(self, action: str) -> StepResult:
        parsed = parse_tool_calls(action)
        if not parsed.calls and not parsed.errors:
            astep = getattr(self.env, "astep", None)
            if astep is None:
                return await asyncio.to_thread(self.env.step, action)
            return await astep(action)
        results = []
        for call in parsed.calls:
            if self._callable(call):
                results.append(await self.tool_map[call.name].acall(call.arguments))
            else:
                results.append(None)
        return self._tool_step(parsed.calls, results, parsed.errors)

    def _callable(self, call: ToolCall) -> bool:
        return call.name in self.tool_map and self._tool_turns < self.max_tool_turns

    def _tool_step(
        self, calls: list[ToolCall], results: list[str | None], errors: list[str]
    ) -> StepResult:
        self._tool_turns += 1
        parts = []
        for call, result in zip(calls, results, strict=True):
            if call.name not in self.tool_map:
                parts.append(f"unknown tool {call.name!r}; available: {sorted(self.tool_map)}")
            elif result is None:
                parts.append(
                    f"no tool calls left ({self.max_tool_turns} used); give your answer instead"
                )
            else:
                parts.append(result)
        parts += [f"error: {error}" for error in errors]
        observation = "\n\n".join(parts)
        info = {"role": "tool", "metrics": {"tool_calls": float(len(calls))}}
        return observation, self._tool_reward, False, False, info

    def close(self) -> None:
        for tool in self.tool_map.values():
            tool.close()
        super().close()
