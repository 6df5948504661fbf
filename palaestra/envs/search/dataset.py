"""Search QA over local files: a QA file (NQ / HotpotQA / 2Wiki / Search-R1 layouts) and a
corpus file, or a retrieval server holding the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palaestra.envs.search.env import SearchQA
from palaestra.envs.search.files import load_corpus, load_qa
from palaestra.tasks.files import LazyProblems


class SearchDataset(SearchQA):
    """Questions from a local QA file ``path``; documents from ``corpus_path`` (a JSONL
    corpus indexed with BM25) or from ``retriever`` (e.g. the URL of a Search-R1 retrieval
    server with a large index). Both files are read on first use."""

    def __init__(self, path: str | Path, *, corpus_path: str | Path | None = None, **kwargs: Any):
        if corpus_path is None and kwargs.get("retriever", "bm25") == "bm25":
            raise ValueError("give corpus_path= (a JSONL corpus) or retriever= (a server URL)")
        corpus = LazyProblems(lambda: load_corpus(corpus_path)) if corpus_path else ()
        super().__init__(LazyProblems(lambda: load_qa(path)), corpus, **kwargs)
        self.path = path
        self.corpus_path = corpus_path
