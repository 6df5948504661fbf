"""Add tools to any env: actions that call tools run them, other actions go to the env.

>>> env = ToolEnv(palaestra.make("math:Arithmetic-v0"), ["python"])  # doctest: +SKIP

Tool results come back as the observation with ``info["role"] == "tool"`` (one entry per
call in ``info["tool_outputs"]``), reward 0 (clamped into the env's reward range) and the
episode still running; an action without tool calls is the env's own action. Calls are read
in the env's tool-call ``format`` (``hermes`` by default; ``tags`` for ``<python>...</python>``,
``fenced`` for ```` ```python ```` blocks). Malformed calls, unknown tools and calls past the
budgets get an explanatory tool observation. Reasoning is not an action: a call written
inside a ``<think>`` block (an unclosed one runs to the end of the action, and text before a
``</think>`` that no ``<think>`` opened is reasoning too) is not made; the action then goes
to the env, which reads it without its reasoning as well
(:func:`~palaestra.core.messages.without_reasoning`).

Turn budget: every step counts, tool calls included. ``max_turns`` defaults to the env's own
limit plus ``max_tool_turns``; the step that reaches it is truncated with
``info["truncation_reason"] = "turn_limit"``. Past ``max_tool_turns`` tool steps, a call gets
a reminder to answer instead. Per-episode tool state (the python REPL) is freed when the
episode ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.messages import without_reasoning
from palaestra.core.tool_calls import ParsedToolCalls, ToolCall, ToolCallFormat, tool_format
from palaestra.core.wrappers import Wrapper, truncate_at_limit
from palaestra.envs.base import AnswerEnv
from palaestra.tools import Tool, ToolLike, make_tools
from palaestra.tools.function import cap

MAX_CALLS_PER_ACTION = 16
"""Calls one action may make; the rest get an error (a policy must not stall the env)."""


class ToolEnv(Wrapper):
    """Wrap ``env`` so the agent may call ``tools`` before (or between) its own actions.

    ``tools`` are tool objects, registered tool names (``"python"``) or
    ``{"name": "python", "stateful": True}`` mappings (names keep registered wrapper stacks
    plain data, so worker processes can rebuild them); a toolset (``{"name": "mcp", ...}``,
    :class:`~palaestra.tools.mcp.MCPToolset`) adds all its tools. A tool with an
    ``attach(env)`` method is told which env uses it (a per-episode MCP toolset refuses to
    serve two envs at once).
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[ToolLike],
        *,
        format: str | ToolCallFormat = "hermes",
        max_tool_turns: int = 8,
        max_turns: int | None = None,
    ):
        super().__init__(env)
        resolved = [tool for spec in tools for tool in make_tools(spec)]
        if not resolved:
            raise ValueError("ToolEnv needs at least one tool, e.g. ToolEnv(env, ['python'])")
        if max_tool_turns < 1:
            raise ValueError(f"max_tool_turns must be >= 1, got {max_tool_turns}")
        names = [tool.name for tool in resolved]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        for tool in resolved:
            attach = getattr(tool, "attach", None)
            if callable(attach):
                attach(self)
        self.tool_map: dict[str, Tool] = {tool.name: tool for tool in resolved}
        self.format = tool_format(format)
        self.max_tool_turns = max_tool_turns
        inner = env.max_turns
        self.turn_limit = (
            max_turns
            if max_turns is not None
            else (None if inner is None else inner + max_tool_turns)
        )
        if self.turn_limit is not None and self.turn_limit < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.turn_limit}")
        self.turns = 0
        self.tool_turns = 0
        low, high = env.reward_range
        self._tool_reward = min(max(0.0, low), high)

    @property
    def own_tools(self) -> list[dict[str, Any]]:
        """Schemas of the tools this wrapper adds."""
        return [tool.schema for tool in self.tool_map.values()]

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [*self.env.tools, *self.own_tools]

    @property
    def tool_format(self) -> str:  # type: ignore[override]
        return self.format.name

    @property
    def max_turns(self) -> int | None:  # type: ignore[override]
        return self.turn_limit

    @property
    def system_prompt(self) -> str:  # type: ignore[override]
        instructions = self.format.instructions(self.own_tools)
        inner = self.env.system_prompt
        return f"{inner}\n\n{instructions}" if inner else instructions

    def _start(self) -> None:
        self.turns = self.tool_turns = 0
        for tool in self.tool_map.values():
            tool.reset()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._start()
        return self.env.reset(seed=seed, options=options)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        self._start()
        return await self.env.areset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        parsed = self._parse(action)
        if not parsed:
            return self._count(self.env.step(action))
        outputs = [
            self.tool_map[call.name].call(call.arguments) if ok else error
            for call, ok, error in self._plan(parsed.calls)
        ]
        return self._tool_step(parsed, outputs)

    async def astep(self, action: str) -> StepResult:
        parsed = self._parse(action)
        if not parsed:
            return self._count(await self.env.astep(action))
        outputs = []
        for call, ok, error in self._plan(parsed.calls):
            outputs.append(await self.tool_map[call.name].acall(call.arguments) if ok else error)
        return self._tool_step(parsed, outputs)

    def _parse(self, action: str) -> ParsedToolCalls:
        """The calls ``action`` makes: those outside its reasoning (see module docstring)."""
        return self.format.parse(without_reasoning(action), self.own_tools)

    def _plan(self, calls: list[ToolCall]) -> list[tuple[ToolCall, bool, str]]:
        """Count this tool step; each call with whether it runs, or the error it gets instead."""
        self.tool_turns += 1
        planned = []
        for index, call in enumerate(calls):
            if call.name not in self.tool_map:
                error = f"error: unknown tool {cap(call.name, 64)!r}; available: {sorted(self.tool_map)}"
            elif self.tool_turns > self.max_tool_turns:
                error = f"error: no tool calls left ({self.max_tool_turns} used); give your answer instead"
            elif index >= MAX_CALLS_PER_ACTION:
                error = f"error: at most {MAX_CALLS_PER_ACTION} tool calls per action; this one did not run"
            else:
                error = ""
            planned.append((call, not error, error))
        return planned

    def _tool_step(self, parsed: ParsedToolCalls, outputs: list[str]) -> StepResult:
        outputs = outputs + [f"error: {error}" for error in parsed.errors]
        info = {
            "role": "tool",
            "tool_outputs": outputs,
            "metrics": {"tool_calls": float(len(parsed.calls))},
        }
        return self._count(("\n\n".join(outputs), self._tool_reward, False, False, info))

    def _count(self, result: StepResult) -> StepResult:
        self.turns += 1
        result = truncate_at_limit(result, self.turns, self.turn_limit)
        if result[2] or result[3]:  # the episode ended: free per-episode tool state (a REPL)
            for tool in self.tool_map.values():
                tool.reset()
        return result

    def oracle(self) -> Policy:
        """Compute with the python tool, then answer with its output (answer envs that have an
        :meth:`~palaestra.envs.base.AnswerEnv.oracle_program`); else the env's own oracle."""
        inner = self.env.unwrapped
        program = inner.oracle_program() if isinstance(inner, AnswerEnv) else None
        if program is None or "python" not in self.tool_map:
            return self.env.oracle()
        call = self.format.format(ToolCall("python", {"code": program}), self.own_tools)
        answer = inner.format_answer
        steps = iter([f"Let me compute it.\n{call}"])
        return lambda observation: next(steps, None) or answer(observation.strip())

    def close(self) -> None:
        for tool in self.tool_map.values():
            tool.close()
        super().close()
