"""BM25 index and its cache, hostile queries, the search tool, the simulated engine."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from palaestra.agents import PolicyAgent
from palaestra.tools.search import (
    BM25Retriever,
    DenseRetriever,
    Doc,
    Retriever,
    SearchTool,
    SimulatedRetriever,
    make_retriever,
)
from palaestra.tools.search.base import MAX_QUERY_CHARS
from palaestra.tools.search.simulated import NOISY, USEFUL

DOCS = [
    Doc("0", "Ada Lovelace", "Ada Lovelace wrote the first published program."),
    Doc("1", "Charles Babbage", "Charles Babbage designed the Analytical Engine."),
    Doc("2", "Analytical Engine", "A mechanical general-purpose computer."),
]
HOSTILE_QUERIES = [
    "",
    " ",
    "\x00",
    "a" * (1 << 20),
    ".*+?[(\\",
    "((((((((((a*)*)*)*)*)*)*)*)*)*$",
    "the of a",
]


def test_doc_contents_round_trip():
    doc = Doc("7", 'Title with "quotes"', "line one\nline two")
    assert Doc.from_contents("7", doc.contents) == doc
    # Search-R1 takes the first line as the title, quoted or not.
    assert Doc.from_contents("8", "Plain title\ntext") == Doc("8", "Plain title", "text")
    assert Doc.from_contents("9", "one line only") == Doc("9", "one line only", "")


def test_bm25_ranks_the_matching_document_first(tmp_path):
    retriever = BM25Retriever(DOCS, cache_dir=tmp_path)
    hits = retriever.search("Babbage designed", k=3)
    assert hits[0].id == "1" and hits[0].score > 0 and [d.score for d in hits[1:]] == [0.0, 0.0]
    assert [d.id for d in retriever.search("Analytical Engine", k=2)] == ["2", "1"]


def test_bm25_always_returns_k_documents_like_a_search_r1_index(tmp_path):
    """No word in common (or no word at all) still gets k documents, with score 0."""
    retriever = BM25Retriever(DOCS, cache_dir=tmp_path)
    for query in ("zebra", "", "the of a"):
        hits = retriever.search(query, k=2)
        assert len(hits) == 2 and {d.score for d in hits} == {0.0}


@pytest.fixture
def fresh_process(monkeypatch):
    """No index loaded in this process yet."""
    from palaestra.tools.search import bm25

    monkeypatch.setattr(bm25, "_loaded", type(bm25._loaded)())


def test_bm25_index_is_cached_on_disk_by_corpus_hash(tmp_path, fresh_process):
    first = BM25Retriever(DOCS, cache_dir=tmp_path)
    assert first.cached_on_disk and first.path.parent == tmp_path / "bm25"
    changed = BM25Retriever(
        [*DOCS[:2], Doc("2", "Analytical Engine", "changed")], cache_dir=tmp_path
    )
    assert changed.key != first.key
    assert sorted(p.name for p in (tmp_path / "bm25").iterdir()) == sorted([first.key, changed.key])


def test_a_saved_index_is_loaded_not_rebuilt(tmp_path, monkeypatch):
    from palaestra.tools.search import bm25

    docs = [Doc(str(i), f"Doc {i}", f"unique token{i}") for i in range(5)]
    BM25Retriever(docs, cache_dir=tmp_path)
    monkeypatch.setattr(bm25, "_loaded", type(bm25._loaded)())  # as in a new process
    monkeypatch.setattr(BM25Retriever, "_build", lambda self: pytest.fail("rebuilt"))
    assert BM25Retriever(docs, cache_dir=tmp_path).search("token3", k=1)[0].id == "3"


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_queries_never_raise(bm25, query):
    hits = bm25.search(query, k=5)
    assert isinstance(hits, list) and len(hits) == 5


def test_bad_k_names_the_problem(bm25):
    with pytest.raises(ValueError, match="k must be a positive int"):
        bm25.search("x", k=0)


def test_k_larger_than_the_corpus(tmp_path):
    assert len(BM25Retriever(DOCS, cache_dir=tmp_path).search("engine lovelace babbage", k=50)) == 3


class Empty(Retriever):
    def search_many(self, queries, k):
        return [[] for _ in queries]


class Failing(Retriever):
    def search_many(self, queries, k):
        raise ConnectionError("server down")


def test_search_tool_budget_wrapping_and_errors(tmp_path):
    tool = SearchTool(BM25Retriever(DOCS, cache_dir=tmp_path), k=1, max_calls=2, wrap="information")
    out = tool.call({"query": "Lovelace"})
    assert out.startswith('<information>Doc 1(Title: "Ada Lovelace")') and out.endswith(
        "</information>"
    )
    assert tool.call({"query": "zebra"}).startswith("<information>Doc 1(Title:")
    assert tool.call({"query": "Lovelace"}).startswith("error: no searches left (2 used)")
    tool.reset()
    assert "Ada Lovelace" in tool.call({"query": "Lovelace"})
    assert (
        tool.call({"q": "x"}) == "error: search: missing argument 'query'; unexpected argument 'q'"
    )
    assert tool.call({"query": 3}).startswith("error: search: argument 'query'")
    assert SearchTool(Empty(), wrap="information").call({"query": "x"}) == (
        "<information>No documents found.</information>"
    )
    failing = SearchTool(Failing())
    assert failing.call({"query": "x"}) == "error: search failed: ConnectionError: server down"


async def test_search_tool_async_failure_is_an_observation():
    assert (await SearchTool(Failing()).acall({"query": "x"})).startswith("error: search failed")


def test_make_retriever_specs(tmp_path):
    assert isinstance(make_retriever({"kind": "bm25", "cache_dir": tmp_path}, DOCS), BM25Retriever)
    with pytest.raises(ValueError, match="unknown retriever"):
        make_retriever("elastic", DOCS)


def engine_reply(observation: str) -> str:
    return "Title: First\nThe first document.\n\nTitle: Second\nThe second one.\n\nExtra text."


def test_simulated_engine_writes_documents_with_the_noise_level():
    prompts = []

    def scripted(observation: str) -> str:
        prompts.append(observation)
        return engine_reply(observation)

    clean = SimulatedRetriever(PolicyAgent(scripted), noise=0.0)
    docs = clean.search("who founded the Quillon Institute", k=2)
    assert [(d.title, d.text) for d in docs] == [
        ("First", "The first document."),
        ("Second", "The second one."),
    ]
    assert prompts[-1].startswith(USEFUL.format(k=2)) and "Quillon Institute" in prompts[-1]
    SimulatedRetriever(PolicyAgent(scripted), noise=1.0).search("anything", k=2)
    assert prompts[-1].startswith(NOISY.format(k=2))
    half = SimulatedRetriever(PolicyAgent(scripted), noise=0.5, seed=3)
    noisy = [half.is_noisy(f"query {i}") for i in range(400)]
    assert 0.4 < sum(noisy) / len(noisy) < 0.6
    assert noisy == [half.is_noisy(f"query {i}") for i in range(400)]  # fixed per query
    assert clean.search("", k=2) == []


def test_simulated_engine_cuts_long_queries():
    seen = []
    engine = SimulatedRetriever(PolicyAgent(lambda obs: seen.append(obs) or engine_reply(obs)))
    engine.search("x" * (1 << 20), k=1)
    assert len(seen[0]) < MAX_QUERY_CHARS + 1000


def hashed_bag_of_words(texts: list[str]) -> np.ndarray:
    """A deterministic toy encoder: word counts hashed into 64 dimensions."""
    vectors = np.zeros((len(texts), 64), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
    return vectors


def test_dense_retriever_ranks_by_cosine_and_caches_embeddings(tmp_path):
    dense = DenseRetriever(DOCS, hashed_bag_of_words, encoder_name="toy", cache_dir=tmp_path)
    hits = dense.search("Charles Babbage designed", k=2)
    assert hits[0].id == "1" and hits[0].score > hits[1].score
    assert dense.path.is_file()

    def docs_must_not_be_embedded_again(texts):
        assert len(texts) == 1, "the document embeddings were not loaded from the cache"
        return hashed_bag_of_words(texts)

    again = DenseRetriever(
        DOCS, docs_must_not_be_embedded_again, encoder_name="toy", cache_dir=tmp_path
    )
    assert [d.id for d in again.search("Charles Babbage designed", k=2)] == [d.id for d in hits]
    assert [len(again.search(q, k=2)) for q in ("", " ", "\x00")] == [2, 2, 2]
    assert len(again.search("a" * (1 << 20), k=2)) == 2
    with pytest.raises(ValueError, match="encoder_name="):
        DenseRetriever(DOCS, hashed_bag_of_words)
