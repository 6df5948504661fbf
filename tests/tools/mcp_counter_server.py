"""A small MCP server for the tests: a stateful counter, tools that hang, one that crashes,
one that fails, and one that shows the server's environment.

Run as ``python mcp_counter_server.py`` (stdio) or ``python mcp_counter_server.py --http PORT``
(streamable HTTP on 127.0.0.1).
"""

import asyncio
import os
import sys
import time

try:  # mcp 2 renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("counter")
count = 0


@server.tool()
def increment(by: int = 1) -> str:
    """Add `by` to the counter and return the new value."""
    global count
    count += by
    return str(count)


@server.tool()
def get() -> str:
    """The counter's value."""
    return str(count)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait `seconds` before answering."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool()
def block(seconds: float) -> str:
    """Block the process for `seconds` (ignoring everything else) before answering."""
    time.sleep(seconds)
    return "unblocked"


@server.tool()
def crash() -> str:
    """Kill the server process."""
    os._exit(3)


@server.tool()
def getenv(name: str) -> str:
    """The value of an environment variable of the server ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def fail() -> str:
    """Raise an error inside the tool."""
    raise ValueError("the counter is broken")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(
            server.streamable_http_app(),
            host="127.0.0.1",
            port=int(sys.argv[2]),
            log_level="warning",
        )
    else:
        server.run()
