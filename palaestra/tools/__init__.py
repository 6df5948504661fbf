"""Tools an agent can call from inside an env: the protocol, tools by name, tools from plain
Python functions, the python tool, MCP servers' tools."""

from palaestra.tools.base import Tool, ToolLike, Toolset, make_tool, make_tools, register_tool
from palaestra.tools.function import FunctionTool, ToolError, function_tool

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolError",
    "ToolLike",
    "Toolset",
    "function_tool",
    "make_tool",
    "make_tools",
    "register_tool",
]
