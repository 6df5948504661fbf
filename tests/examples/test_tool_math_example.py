"""examples/tool_math.py: the tool env evaluated with the oracle and trained for a few steps."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="training needs the 'train' extra")
pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

EXAMPLE = Path(__file__).parents[2] / "examples" / "tool_math.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("tool_math_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_oracle_solves_the_tool_env(example):
    assert example.evaluate_oracle(4) == 1.0


def test_training_steps_run_on_the_tool_env(example, tmp_path):
    history = example.train(tmp_path / "run", steps=2, sft_steps=5)
    assert [int(r["step"]) for r in history] == [1, 2]
    assert all(math.isfinite(r["loss"]) and r["errors"] == 0 for r in history)


@pytest.mark.slow
def test_warm_started_policy_calls_the_tool(example, tmp_path):
    history = example.train(tmp_path / "run", steps=2)
    assert max(r["tool_turns"] for r in history) > 0.5
