"""Tools an agent can call from inside an env: the protocol, tools by name, tools from plain
Python functions, the python tool."""

from palaestra.tools.base import Tool, ToolLike, make_tool, register_tool
from palaestra.tools.function import FunctionTool, ToolError, function_tool

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolError",
    "ToolLike",
    "function_tool",
    "make_tool",
    "register_tool",
]
