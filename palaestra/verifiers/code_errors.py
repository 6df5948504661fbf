"""Where a candidate program failed, in its own code: feedback a policy can act on.

A traceback of a sandboxed run names the program's file (``<sandbox>`` for a program run
as ``__main__``, ``solution.py`` for code the grader loads); the last frame in that file is
the line the candidate wrote that failed.
"""

from __future__ import annotations

import re

STDERR_SHOWN = 400
"""Characters of a program's stderr shown in feedback (its end, where the error is)."""


def error_location(stderr: str, code: str, filename: str) -> str:
    """``"line 3: return a / b"`` for the last frame of ``filename`` in ``stderr``, or ``""``.

    >>> error_location('  File "<sandbox>", line 2\\n    x=(\\nSyntaxError: ...', "a=1\\nx=(", "<sandbox>")
    'line 2: x=('
    """
    lines = re.findall(rf'File "{re.escape(filename)}", line (\d+)', stderr)
    if not lines:
        return ""
    number = int(lines[-1])
    source = code.splitlines()
    text = source[number - 1].strip() if 0 < number <= len(source) else ""
    return f"line {number}: {text[:80]}" if text else f"line {number}"


def last_error(stderr: str) -> str:
    """The last line of a traceback (``"ZeroDivisionError: division by zero"``), or ``""``."""
    tail = stderr.strip().splitlines()[-1:]
    return tail[0][:200] if tail else ""


def stderr_tail(stderr: str) -> str:
    """The end of ``stderr``, at most :data:`STDERR_SHOWN` characters."""
    text = stderr.strip()
    return text if len(text) <= STDERR_SHOWN else "..." + text[-STDERR_SHOWN:]
