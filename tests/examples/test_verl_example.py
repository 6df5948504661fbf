"""examples/verl_agent_loop.py: the verl agent loop's body plays rows token-exact."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")

EXAMPLE = Path(__file__).parents[2] / "examples" / "verl_agent_loop.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("verl_agent_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_binary_search_server_wins_every_row(example):
    trajectories = example.play_rows(range(4))
    assert [t.reward for t in trajectories] == [1.0] * 4
    for t in trajectories:
        assert len(t.response_ids) == len(t.response_mask) == len(t.response_logprobs)
        generated = [
            lp for lp, bit in zip(t.response_logprobs, t.response_mask, strict=True) if bit
        ]
        assert generated == [-0.5] * len(generated) and 0 in t.response_mask
        assert t.num_turns <= 6  # binary search over 1..50
