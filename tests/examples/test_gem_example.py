"""examples/gem_both_ways.py: palaestra envs in GEM's vector env, GEM envs in palaestra."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("gem", reason="needs gem-llm (the 'gem' extra)")

EXAMPLE = Path(__file__).parents[2] / "examples" / "gem_both_ways.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("gem_both_ways_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("async_mode", [False, True])
def test_binary_search_wins_every_episode_in_gem_vector_env(example, async_mode):
    returns = example.play_in_gem_vector_env(num_envs=4, steps=30, async_mode=async_mode)
    assert len(returns) >= 8 and all(r == 1.0 for r in returns)


def test_palaestra_eval_runs_gem_games(example):
    rewards = example.evaluate_gem_games(episodes=4)
    assert set(rewards) == set(example.GEM_GAMES)
    assert all(-1.0 <= r <= 1.0 for r in rewards.values())


def test_gem_python_tool_turn(example):
    role, output = example.gem_tool_env_turn()
    assert role == "tool" and "42" in output
