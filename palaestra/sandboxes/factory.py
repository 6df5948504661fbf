"""Pick a sandbox backend by name: ``make_sandbox("docker")``, or a shared one per name."""

from __future__ import annotations

import atexit
import difflib
import importlib
import threading
from typing import Any

from palaestra.sandboxes.base import Sandbox

BACKENDS = {
    "local": "palaestra.sandboxes.local:LocalSandbox",
    "docker": "palaestra.sandboxes.docker:DockerSandbox",
    "e2b": "palaestra.sandboxes.e2b:E2BSandbox",
}
"""Backend name -> "module:Class" (imported only when that backend is asked for)."""

_shared: dict[str, Sandbox] = {}
_shared_lock = threading.Lock()


def backend_class(name: str) -> type[Sandbox]:
    """The class of backend ``name``; a clear error for an unknown name."""
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, BACKENDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"unknown sandbox backend {name!r}; {hint}choose one of {', '.join(BACKENDS)}"
        )
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_sandbox(name: str = "local", **kwargs: Any) -> Sandbox:
    """A new sandbox of backend ``name`` ("local", "docker" or "e2b"); ``kwargs`` go to it.

    >>> make_sandbox("docker", pool_size=4)  # doctest: +SKIP
    """
    return backend_class(name)(**kwargs)


def shared_sandbox(name: str = "local") -> Sandbox:
    """The process-wide sandbox of backend ``name`` (started on first use under a lock, shared
    by all envs, closed at interpreter exit)."""
    with _shared_lock:
        if name not in _shared:
            _shared[name] = sandbox = make_sandbox(name)
            atexit.register(sandbox.close)
        return _shared[name]


def resolve_sandbox(sandbox: Sandbox | str | None) -> Sandbox:
    """What envs and tools accept as ``sandbox=``: an instance, a backend name, or None (local)."""
    if sandbox is None:
        return shared_sandbox("local")
    if isinstance(sandbox, str):
        return shared_sandbox(sandbox)
    return sandbox
