"""Tools an agent can call from inside an env: the protocol, tools by name, the python tool."""

from palaestra.tools.base import Tool, ToolLike, make_tool, register_tool

__all__ = ["Tool", "ToolLike", "make_tool", "register_tool"]
