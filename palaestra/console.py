"""What the ``palaestra`` commands print: errors, and text from envs and messages, which
rich must never read as markup (``[row col]`` or ``palaestra[vllm]`` would vanish).

>>> from rich.console import Console
>>> console = Console(width=60, color_system=None)
>>> console.print(text_panel("Type [row col] to press a light.", title="task", title_align="left"))
╭─ task ───────────────────────────────────────────────────╮
│ Type [row col] to press a light.                         │
╰──────────────────────────────────────────────────────────╯
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text


def error_text(message: object) -> Text:
    """``error: <message>``, the message taken literally."""
    return Text.assemble(("error: ", "red"), str(message))


def fail(console: Console, message: object, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` (taken literally, on one line however wide the terminal, so
    logs can grep it) and leave the command with ``code``."""
    console.print(error_text(message), soft_wrap=True)
    raise typer.Exit(code)


def text_panel(text: str, **options: Any) -> Panel:
    """A panel around ``text`` taken literally (titles may use markup)."""
    return Panel(Text(text), **options)
