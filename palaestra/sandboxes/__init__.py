"""Run untrusted code: the :class:`Sandbox` protocol and its backends (local by default).

>>> from palaestra.sandboxes import LocalSandbox
>>> with LocalSandbox() as sandbox:  # doctest: +SKIP
...     sandbox.run("print(1 + 1)").stdout
'2\\n'

``make_sandbox("docker")`` / ``make_sandbox("e2b")`` pick a backend by name (those two need
the ``docker`` / ``e2b`` extras; their modules are imported only when asked for).
"""

from palaestra.sandboxes.base import ExecResult, Limits, Sandbox, SandboxSession
from palaestra.sandboxes.factory import BACKENDS, make_sandbox, resolve_sandbox
from palaestra.sandboxes.local import LocalSandbox, safe_environment
from palaestra.sandboxes.pool import WorkerSession

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "Sandbox",
    "SandboxSession",
    "WorkerSession",
    "make_sandbox",
    "resolve_sandbox",
    "safe_environment",
]
