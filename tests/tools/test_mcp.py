"""MCP servers' tools as palaestra tools, against a small server written for the tests."""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="MCP tools need the 'mcp' extra: pip install 'palaestra[mcp]'")

import palaestra
from palaestra.core.registry import WrapperSpec
from palaestra.core.tool_calls import ToolCall, format_tool_call
from palaestra.envs.tool_env import ToolEnv
from palaestra.tools import Tool, make_tool, make_tools
from palaestra.tools.mcp import MCPServer, MCPServerError, MCPToolset, render_result

SCRIPT = Path(__file__).with_name("mcp_counter_server.py")
STARTUP = 60.0  # generous: a loaded machine imports the SDK slowly; never reached when healthy
SERVER = {"command": sys.executable, "args": [str(SCRIPT)], "quiet": True}


def stdio_toolset(**options: object) -> MCPToolset:
    return MCPToolset(SERVER, startup_timeout=STARTUP, **options)  # type: ignore[arg-type]


def tools_of(toolset: MCPToolset) -> dict[str, Tool]:
    return {tool.name: tool for tool in toolset.tools}


def stdio_servers() -> list[int]:
    """Pids of this process's stdio test servers still alive (the HTTP one aside)."""
    if not Path("/proc").is_dir():
        pytest.skip("counting child processes needs /proc")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        ours = int(parent) == os.getpid() and state != "Z"
        if ours and str(SCRIPT).encode() in cmdline and b"--http" not in cmdline:
            pids.append(int(entry.name))
    return pids


def call(name: str, **arguments: object) -> str:
    return format_tool_call(ToolCall(name, dict(arguments)))


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The test server over streamable HTTP on a free localhost port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            if server.poll() is not None:
                pytest.fail(f"the HTTP test server exited with status {server.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the HTTP test server did not start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


def test_schemas_come_through_and_calls_work_over_stdio() -> None:
    with stdio_toolset() as toolset:
        tools = tools_of(toolset)
        assert list(tools) == ["increment", "get", "sleep", "block", "crash", "getenv", "fail"]
        assert tools["increment"].schema == {
            "type": "function",
            "function": {
                "name": "increment",
                "description": "Add `by` to the counter and return the new value.",
                "parameters": {
                    "type": "object",
                    "properties": {"by": {"type": "integer", "default": 1}},
                    "required": [],
                },
            },
        }
        assert tools["sleep"].schema["function"]["parameters"]["required"] == ["seconds"]
        assert tools["increment"].call({"by": 2}) == "2"
        assert tools["increment"].call({}) == "3"
        assert asyncio.run(tools["get"].acall({})) == "3"
        assert tools["fail"].call({}).startswith("error: fail: ")


def test_invalid_arguments_give_a_clear_error() -> None:
    with stdio_toolset(include=["increment", "sleep"]) as toolset:
        increment, sleep = toolset.tools
        assert (
            increment.call({"by": "x"})
            == "error: increment: argument 'by': 'x' is not of type 'integer'"
        )
        assert sleep.call({}) == "error: sleep: missing argument 'seconds'"
        assert (
            increment.call(["by", 1])
            == "error: increment: arguments must be a JSON object, got list"
        )  # type: ignore[arg-type]
        assert increment.call({"by": 4}) == "4"  # the refused calls never reached the server


def test_argument_errors_are_capped() -> None:
    with stdio_toolset(include=["increment"], max_output_chars=100) as toolset:
        (increment,) = toolset.tools
        out = increment.call({"by": "x" * 1_000_000})  # the schema error quotes the value
        assert out.startswith("error: increment: argument 'by'") and len(out) < 130


def test_a_per_episode_toolset_serves_one_env_at_a_time() -> None:
    toolset = stdio_toolset(per_episode=True)
    first = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [toolset])
    try:
        with pytest.raises(ValueError, match="already serves"):
            ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [toolset])
        first.close()  # closing the first env frees the toolset for another
        second = ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [toolset])
        second.reset(seed=0)
        assert second.step(call("increment", by=2))[0] == "2"
        second.close()
    finally:
        toolset.close()
    assert stdio_servers() == []


def test_calls_over_streamable_http(http_url: str) -> None:
    with MCPToolset({"url": http_url, "headers": {"X-Client": "tests"}}) as toolset:
        tools = tools_of(toolset)
        assert (
            "increment" in tools
            and tools["get"].schema["function"]["parameters"]["properties"] == {}
        )
        before = int(tools["get"].call({}))
        assert tools["increment"].call({"by": 5}) == str(before + 5)
        assert asyncio.run(tools["increment"].acall({"by": 1})) == str(before + 6)


def test_per_episode_servers_isolate_concurrent_episodes() -> None:
    spec = {"name": "mcp", "server": SERVER, "per_episode": True, "startup_timeout": STARTUP}
    stack = pickle.loads(
        pickle.dumps(WrapperSpec("palaestra.envs.tool_env:ToolEnv", {"tools": [spec]}))
    )
    envs = [stack.apply(palaestra.make("game:GuessTheNumber-v0")) for _ in range(2)]
    assert any(schema["function"]["name"] == "increment" for schema in envs[0].tools)
    assert "increment" in envs[0].system_prompt

    async def episode(env: ToolEnv, by: int, times: int) -> list[str]:
        await env.areset(seed=0)
        seen = [(await env.astep(call("increment", by=by)))[0] for _ in range(times)]
        return [*seen, (await env.astep(call("get")))[0]]

    async def both() -> list[list[str]]:
        return await asyncio.gather(episode(envs[0], 1, 3), episode(envs[1], 10, 2))

    try:
        assert asyncio.run(both()) == [["1", "2", "3", "3"], ["10", "20", "20"]]
        envs[0].reset(seed=1)  # a new episode starts from a fresh server
        assert envs[0].step(call("get"))[0] == "0"
    finally:
        for env in envs:
            env.close()
    assert stdio_servers() == []


def test_a_shared_server_shares_state_across_envs_and_episodes() -> None:
    toolset = stdio_toolset()
    envs = [ToolEnv(palaestra.make("game:GuessTheNumber-v0"), [toolset]) for _ in range(2)]

    async def episode(env: ToolEnv) -> None:
        await env.areset(seed=0)
        for _ in range(3):
            await env.astep(call("increment"))

    async def both() -> None:
        await asyncio.gather(episode(envs[0]), episode(envs[1]))

    try:
        asyncio.run(both())
        envs[0].reset(seed=1)
        assert envs[0].step(call("get"))[0] == "6"
    finally:
        for env in envs:
            env.close()
    assert stdio_servers() == []


def test_a_hung_call_returns_an_error_within_the_timeout() -> None:
    with stdio_toolset(timeout=0.5) as toolset:
        tools = tools_of(toolset)
        tools["get"].call({})  # started: the timeout below is the call's alone
        message = tools["sleep"].call({"seconds": 600})
        assert message.startswith("error: sleep: MCP server ")
        assert message.endswith("did not answer within 0.5 s")

        async def call_while_ticking() -> tuple[str, int]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            result = await tools["sleep"].acall({"seconds": 600})
            ticker.cancel()
            return result, ticks

        message, ticks = asyncio.run(call_while_ticking())
        assert message.endswith("did not answer within 0.5 s")
        assert ticks > 0  # the caller's loop kept running while the call waited
        assert tools["increment"].call({}) == "1"  # the server still serves other calls
    assert stdio_servers() == []


def test_close_stops_a_server_stuck_in_a_blocking_call() -> None:
    toolset = stdio_toolset(timeout=0.5, include=["block"])
    (block,) = toolset.tools
    assert block.call({"seconds": 600}).endswith("did not answer within 0.5 s")
    assert stdio_servers() != []
    toolset.close()  # the server ignores its closed stdin: it gets terminated
    assert stdio_servers() == []


def test_a_crashed_server_gives_an_error_and_the_next_episode_works() -> None:
    env = ToolEnv(
        palaestra.make("game:GuessTheNumber-v0"),
        [stdio_toolset(per_episode=True)],
    )
    try:
        env.reset(seed=0)
        assert env.step(call("increment"))[0] == "1"
        obs, _, terminated, truncated, info = env.step(call("crash"))
        assert obs.startswith("error: crash: MCP server ") and "closed the connection" in obs
        assert info["role"] == "tool" and not terminated and not truncated
        assert "restarts with the next episode" in env.step(call("get"))[0]
        env.reset(seed=1)
        assert env.step(call("increment"))[0] == "1"
    finally:
        env.close()
    assert stdio_servers() == []


def test_a_shared_server_restarts_on_the_next_call_after_a_crash() -> None:
    with stdio_toolset() as toolset:
        tools = tools_of(toolset)
        assert tools["increment"].call({"by": 7}) == "7"
        assert "restarts with the next call" in asyncio.run(tools["crash"].acall({}))
        assert tools["get"].call({}) == "0"
    assert stdio_servers() == []


def test_stdio_servers_see_only_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PALAESTRA_TEST_SECRET", "hunter2")
    server = {**SERVER, "env": {"GREETING": "hello"}}
    with MCPToolset(server, include=["getenv"], startup_timeout=STARTUP) as toolset:
        (getenv,) = toolset.tools
        assert getenv.call({"name": "PALAESTRA_TEST_SECRET"}) == "(no output)"
        assert getenv.call({"name": "GREETING"}) == "hello"
        assert getenv.call({"name": "PATH"}) == os.environ["PATH"]


def test_make_tools_expands_a_toolset_and_make_tool_refuses_one() -> None:
    tools = make_tools({"name": "mcp", "server": SERVER, "prefix": "c_", "include": ["get"]})
    try:
        assert [tool.name for tool in tools] == ["c_get"]
        assert tools[0].call({}) == "0"
        with pytest.raises(TypeError, match="use make_tools"):
            make_tool(tools[0].toolset)  # type: ignore[attr-defined]
    finally:
        tools[0].close()
    assert stdio_servers() == []


def test_bad_servers_fail_when_the_toolset_is_made() -> None:
    with pytest.raises(MCPServerError, match="did not start: FileNotFoundError"):
        MCPToolset({"command": "/nonexistent/mcp-server"})
    with pytest.raises(ValueError, match="no tool"):
        stdio_toolset(include=["decrement"])
    silent = {**SERVER, "args": ["-c", "import time; time.sleep(600)", str(SCRIPT)]}
    with pytest.raises(MCPServerError, match=r"did not start within 0\.5 s"):
        MCPToolset(silent, startup_timeout=0.5)  # a process that never answers
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServer()
    with pytest.raises(ValueError, match="http"):
        MCPServer(url="ftp://example.org/mcp")
    with pytest.raises(ValueError, match="headers apply to a url"):
        MCPServer(command="server", headers={"Authorization": "Bearer x"})
    assert "Bearer" not in repr(MCPServer(url="http://127.0.0.1:1/mcp", headers={"A": "Bearer x"}))
    assert stdio_servers() == []


def test_results_render_as_text() -> None:
    result = {
        "content": [
            {"type": "text", "text": "a chart:"},
            {"type": "image", "data": "aGVsbG8h", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "notes"}},
        ]
    }
    assert render_result("plot", result) == "a chart:\n[image: image/png, 6 bytes]\nnotes"
    assert render_result("plot", {"content": [], "structuredContent": {"x": 1}}) == '{"x": 1}'
    failed = {"content": [{"type": "text", "text": "no such file"}], "isError": True}
    assert render_result("read", failed) == "error: read: no such file"
    long = {"content": [{"type": "text", "text": "x" * 50}]}
    assert render_result("read", long, max_chars=10) == "x" * 10 + "\n(output truncated)"
