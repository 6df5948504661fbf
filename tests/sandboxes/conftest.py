"""Shared sandboxes for the sandbox tests (starting interpreters once keeps the suite fast)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from palaestra.sandboxes import LocalSandbox

if not sys.platform.startswith("linux"):
    pytest.skip("the local sandbox needs Linux", allow_module_level=True)


@pytest.fixture(scope="session")
def sandbox() -> Iterator[LocalSandbox]:
    """The default configuration: every mechanism the OS offers."""
    with LocalSandbox(pool_size=2) as box:
        yield box


LEVELS = {
    "default": {},
    "no-mount": {"mount": False},
    "no-namespaces": {"namespaces": False},
    "rlimits-only": {
        "namespaces": False,
        "landlock": False,
        "seccomp": False,
        "cgroups": False,
        "allow_unconfined_root": True,
    },
}
"""Isolation levels, forced lower one mechanism at a time: everything this OS offers; user,
network and PID namespaces without the private mount namespace; no namespaces (Landlock,
seccomp, cgroups, and ``nobody`` as root); and the plain fallback of rlimits alone."""


@pytest.fixture(scope="session", params=list(LEVELS))
def any_sandbox(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    """The sandbox at each isolation level (each test checks what that level promises)."""
    with LocalSandbox(pool_size=1, **LEVELS[request.param]) as box:
        yield box


def parent_of(pid: int) -> int | None:
    """``pid``'s parent (from /proc), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents = {
        int(entry): parent_of(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()
    }
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found
