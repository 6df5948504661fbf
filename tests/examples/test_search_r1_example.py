"""examples/search_r1.py: policies played through the retrieval server, in Search-R1's protocol."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("bm25s", reason="needs the 'search' extra")
pytest.importorskip("uvicorn", reason="needs the 'search' extra")

EXAMPLE = Path(__file__).parents[2] / "examples" / "search_r1.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("search_r1_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_only_searching_answers_the_questions(example):
    from tests.envs.search.conftest import free_port

    port = free_port()
    example.serve(port)
    rates = example.success_rates(f"http://127.0.0.1:{port}/retrieve", episodes=24)
    assert rates["oracle"] == 1.0
    assert rates["closed-book"] <= 0.1
    assert rates["one-search"] < 0.5
