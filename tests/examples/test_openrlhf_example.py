"""examples/openrlhf_agent.py: the agent file OpenRLHF loads, played with a stand-in engine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="OpenRLHF's scores are tensors")
pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")

EXAMPLE = Path(__file__).parents[2] / "examples" / "openrlhf_agent.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("openrlhf_agent_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_agent_file_exposes_the_executor(example):
    from palaestra.integrations.openrlhf import AgentExecutor

    assert example.AgentExecutor is AgentExecutor


def test_binary_search_engine_wins_every_row(example):
    results = example.play_rows(range(4))
    assert [r["reward"] for r in results] == [1.0] * 4
    assert all(len(r["action_ranges"]) <= 6 for r in results)
