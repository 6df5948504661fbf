"""Search: questions answered by searching a knowledge base (Search-R1, GEM's search tool).

``search:Synthetic-v0`` asks multi-hop questions over a fictional knowledge base generated
from a seed (offline, nothing to download), searched with a local BM25 index;
``search:Dataset-v0`` reads NQ / HotpotQA / 2Wiki-style files and a JSONL corpus (or points
at a Search-R1 retrieval server with ``retriever="http://host:8000/retrieve"``). Each id
calls the search tool in the default tool-call format; its ``-SearchR1`` twin speaks the
Search-R1 protocol as Search-R1 runs it (``<search>`` / ``<information>`` / ``<answer>``,
:mod:`palaestra.envs.search.search_r1`). Synthetic variants:
``-SingleHop``, ``-MultiHop``. Registering imports nothing heavy: the index is built (or
loaded from its disk cache) when an env is made.
"""

from pathlib import Path

from palaestra.core.registry import WrapperSpec, register

DATA = Path(__file__).parent / "data"
SAMPLE_QA_PATH = str(DATA / "sample_qa.jsonl")
SAMPLE_CORPUS_PATH = str(DATA / "sample_corpus.jsonl")

PROTOCOLS = {
    "": WrapperSpec("palaestra.envs.search.env:SearchEnv", {}),
    "-SearchR1": WrapperSpec("palaestra.envs.search.search_r1:SearchR1Env", {}),
}
"""Id suffix -> the wrapper that plays the env in that protocol."""

_SYNTHETIC_VARIANTS = {
    "SingleHop": {"kinds": ("single-hop",)},
    "MultiHop": {"kinds": ("bridge", "comparison", "aggregation")},
}

for _suffix, _tool in PROTOCOLS.items():
    register(
        f"search:Synthetic{_suffix}-v0",
        "palaestra.envs.search.synthetic:SyntheticSearchQA",
        wrappers=[_tool],
        variants={} if _suffix else _SYNTHETIC_VARIANTS,
    )
    register(
        f"search:Dataset{_suffix}-v0",
        "palaestra.envs.search.dataset:SearchDataset",
        kwargs={"path": SAMPLE_QA_PATH, "corpus_path": SAMPLE_CORPUS_PATH},
        wrappers=[_tool],
        description="Search QA from a local NQ / HotpotQA / 2Wiki-style file (path=...) over a "
        "JSONL corpus (corpus_path=...) or a retrieval server (retriever=URL); defaults to a "
        "shipped sample.",
    )
