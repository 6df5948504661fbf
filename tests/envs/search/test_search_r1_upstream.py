"""palaestra's retrieval server and -SearchR1 envs, driven by Search-R1's own client code
(vendored verbatim in search_r1_upstream.py) exactly as its training loop calls it."""

from __future__ import annotations

import pytest

from palaestra.envs.search.questions import make_question
from tests.envs.search.search_r1_upstream import LLMGenerationManager

pytest.importorskip("requests", reason="Search-R1's client code uses requests")


def test_a_whole_grpo_step_of_searches_in_one_request(server_url, world):
    """Search-R1's GRPO script: 512 prompts x 5 samples, every search of a step in one
    request; the default cap takes 4096."""
    client = LLMGenerationManager(server_url, topk=3)
    queries = [make_question(world, i).text for i in range(4096)]
    results = client._batch_search(queries)["result"]
    assert len(results) == 4096 and all(len(row) == 3 for row in results)
    passages = client.batch_search(queries[:2560])
    assert len(passages) == 2560 and all(p.startswith('Doc 1(Title: "') for p in passages)


def test_topk_and_empty_queries_as_search_r1_sends_them(server_url):
    for topk in (None, 0, 1, 5):
        client = LLMGenerationManager(server_url, topk=topk)
        rows = client._batch_search(["", "zzzz", "the Lantern of Orinaes"])["result"]
        assert [len(row) for row in rows] == [topk or 3] * 3
