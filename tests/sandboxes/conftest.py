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


@pytest.fixture(scope="session", params=["default", "no-namespaces", "rlimits-only"])
def any_sandbox(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    """Each isolation level: full, Landlock without namespaces, and the plain fallback."""
    options = {
        "default": {},
        "no-namespaces": {"namespaces": False},
        "rlimits-only": {"namespaces": False, "landlock": False},
    }[request.param]
    with LocalSandbox(pool_size=1, **options) as box:
        yield box


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found
