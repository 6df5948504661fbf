"""Run untrusted code: the :class:`Sandbox` protocol and its backends (local by default).

>>> from palaestra.sandboxes import LocalSandbox
>>> with LocalSandbox() as sandbox:  # doctest: +SKIP
...     sandbox.run("print(1 + 1)").stdout
'2\\n'
"""

from palaestra.sandboxes.base import ExecResult, Limits, Sandbox, SandboxSession
from palaestra.sandboxes.local import LocalSandbox, LocalSession, safe_environment

__all__ = [
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "LocalSession",
    "Sandbox",
    "SandboxSession",
    "safe_environment",
]
