"""verl's and OpenRLHF's own code on a CPU machine: stand-ins for the GPU-stack packages they
import at module level but whose code the adapters' paths never run.

verl and OpenRLHF are installed with ``--no-deps`` (``.ci/run``): their dependency pins
(CUDA vLLM, DeepSpeed, flash-attn, ray, a transformers older than the suite's) do not
install here. What the tests run of them (verl's ``AgentLoopBase``, ``register``,
``AgentLoopWorker._run_agent_loop`` and ``RLHFDataset``; OpenRLHF's ``AgentExecutorBase``,
agent-file loader, ``RolloutRayActor.generate_responses`` and experience builder) is their
real code. A dependency that is installed is used as it is; a missing one becomes a module
whose attributes are mocks, except for what those paths call:

* ``ray.remote``: returns the class it decorates (so ``@ray.remote`` classes stay classes);
* ``hydra.utils.instantiate``: builds ``_target_`` with the keyword arguments, which is what
  hydra does with the flat ``{"_target_": ...}`` configs of verl's agent-loop registry
  (hydra-core itself cannot import beside the antlr4 4.13 that math-verify needs);
* ``vllm.inputs.TokensPrompt``: ``dict`` (a ``TypedDict`` at run time) and
  ``vllm.utils.random_uuid``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import uuid
from collections.abc import Iterable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock

import pytest

VERL_MISSING_OK = ("ray", "tensordict", "hydra", "codetiming", "cachetools")
OPENRLHF_MISSING_OK = ("ray", "vllm", "pylatexenc", "aiohttp")


def _remote(*args: Any, **kwargs: Any) -> Any:
    """``ray.remote`` as a no-op: ``@ray.remote`` and ``@ray.remote(num_gpus=1)``."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda target: target


def _instantiate(config: Any, **kwargs: Any) -> Any:
    """hydra's ``instantiate`` for a flat ``{"_target_": "module.Class"}`` config."""
    module, _, name = str(config["_target_"]).rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


_OVERRIDES: dict[str, dict[str, Any]] = {
    "ray": {"remote": _remote},
    "hydra": {"utils": SimpleNamespace(instantiate=_instantiate)},
    "hydra.utils": {"instantiate": _instantiate},
    "vllm.inputs": {"TokensPrompt": dict},
    "vllm.utils": {"random_uuid": lambda: uuid.uuid4().hex},
}


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the stubbed top-level packages (and any submodule of them)."""

    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.partition(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = mock.MagicMock(name=spec.name)
        module.__path__, module.__spec__, module.__name__ = [], spec, spec.name
        for attribute, value in _OVERRIDES.get(spec.name, {}).items():
            setattr(module, attribute, value)
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass


@contextlib.contextmanager
def _stubs_for_missing(names: Iterable[str]) -> Iterator[None]:
    """Stub the missing ``names`` while the block runs, then take the stubs out of the import
    system again (the framework's modules keep theirs), so other tests see the packages as
    missing, as they are."""
    missing = {name for name in names if importlib.util.find_spec(name) is None}
    finder = _StubFinder(missing)
    sys.meta_path.append(finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.partition(".")[0] in missing]:
            del sys.modules[name]


def import_framework(
    package: str, missing_ok: Iterable[str], modules: Iterable[str]
) -> list[ModuleType]:
    """Skip unless ``package`` is installed; import ``modules`` (the framework's, then the
    palaestra adapter's) with the missing ``missing_ok`` packages stubbed. A palaestra
    adapter imported earlier, before its framework could be, is imported again."""
    if importlib.util.find_spec(package) is None:
        pytest.skip(
            f"{package} is not installed (`pip install --no-deps {package}`, see .ci/run)",
            allow_module_level=True,
        )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with _stubs_for_missing(missing_ok):
        imported = []
        for name in modules:
            module = importlib.import_module(name)
            if name.startswith("palaestra."):
                module = importlib.reload(module)
            imported.append(module)
    root.handlers[:] = handlers  # verl calls logging.basicConfig when imported
    root.setLevel(level)
    return imported
