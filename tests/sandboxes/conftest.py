"""Shared sandboxes for the sandbox tests (starting interpreters once keeps the suite fast)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from palaestra.sandboxes import LocalSandbox
from palaestra.sandboxes._plumbing import all_pids, parent_of

if not sys.platform.startswith("linux"):
    pytest.skip("the local sandbox needs Linux", allow_module_level=True)


SANDBOX_PYTHON = os.environ.get("PALAESTRA_TEST_SANDBOX_PYTHON") or None
"""The interpreter the sandboxes under test run code with (default: this one);
``tests/sandboxes/test_layouts.py`` runs the escape suite with others."""


def make_box(**kwargs: Any) -> LocalSandbox:
    """A sandbox of the interpreter under test."""
    return LocalSandbox(python=SANDBOX_PYTHON, **kwargs)


@pytest.fixture(scope="session")
def sandbox() -> Iterator[LocalSandbox]:
    """The default configuration: every mechanism the OS offers."""
    with make_box(pool_size=2) as box:
        yield box


LEVELS = {
    "default": {},
    "no-cgroups": {"cgroups": False},
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
"""Isolation levels, forced lower one mechanism at a time: everything this OS offers; no
usable cgroup (what a cgroup-v2 host without delegation gives: on a root host the code
still runs as an unprivileged uid, so rlimits hold); user, network and PID namespaces
without the private mount namespace; no namespaces (Landlock, seccomp, cgroups, and an
unprivileged uid as root where it can read Python); and the plain fallback of rlimits
alone."""


@pytest.fixture(scope="session", params=list(LEVELS))
def any_sandbox(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    """The sandbox at each isolation level (each test checks what that level promises)."""
    with make_box(pool_size=1, **LEVELS[request.param]) as box:
        yield box


def fresh_listing(box: LocalSandbox) -> str:
    """What a run sees in its work dir before writing anything: ``[]``, or, for a Python
    installed under ``/tmp``, the top directory of its read-only view there."""
    return box.run("import os\nprint(sorted(os.listdir('.')))").stdout.strip()


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents = {child: parent_of(child) for child in all_pids()}
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        below = [child for child, parent in parents.items() if parent == current]
        found += below
        frontier += below
    return found
