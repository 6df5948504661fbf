"""Local QA files (NQ, HotpotQA, 2WikiMultihopQA, Search-R1 / FlashRAG layouts) and corpus
files (JSONL, one document per line) for the search envs. Nothing is downloaded.

Answers are read from ``golden_answers`` (Search-R1, FlashRAG), ``answers`` or ``answer``
(NQ-open, HotpotQA, 2Wiki; a string or a list); gold evidence titles from HotpotQA/2Wiki
``supporting_facts`` (``[[title, sentence], ...]``) when present. A corpus line is
``{"id", "contents": "\\"Title\\"\\ntext"}`` (Search-R1's wiki-18) or ``{"id", "title", "text"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from palaestra.tasks import Problem
from palaestra.tasks.files import Record, iter_records, read_problems
from palaestra.tools.search.base import Doc

ANSWER_FIELDS = ("golden_answers", "answers", "answer")
PROMPT = "Question: {question}"


def _answers(row: Record) -> tuple[str, ...]:
    for name in ANSWER_FIELDS:
        if name in row:
            value = row[name]
            answers = (value,) if isinstance(value, str) else tuple(value)
            if not answers or not all(isinstance(a, str) for a in answers):
                raise ValueError(f"field {name!r} must be a string or a non-empty list of strings")
            return answers
    raise ValueError(
        f"no answer field (one of {', '.join(ANSWER_FIELDS)}; fields: {', '.join(sorted(row))})"
    )


def _evidence_titles(row: Record) -> tuple[str, ...]:
    facts = row.get("supporting_facts") or ()
    if isinstance(facts, Mapping):  # the Hugging Face layout: {"title": [...], "sent_id": [...]}
        titles = facts.get("title") or ()
    else:
        titles = [fact[0] for fact in facts if isinstance(fact, Sequence) and fact]
    return tuple(dict.fromkeys(str(t) for t in titles))


def qa_problem(row: Record, index: int) -> Problem:
    """A problem from one QA row (see the module docstring for the fields read)."""
    question = row.get("question")
    if not isinstance(question, str):
        raise ValueError(f"no string field 'question' (fields: {', '.join(sorted(row))})")
    problem_id = row.get("id", row.get("_id", index))
    metadata: dict[str, Any] = {"question": question, "evidence_titles": _evidence_titles(row)}
    for key in ("type", "level"):
        if key in row:
            metadata[key] = row[key]
    return Problem(
        PROMPT.format(question=question), _answers(row), id=str(problem_id), metadata=metadata
    )


def load_qa(data: str | Path | Sequence[Record]) -> list[Problem]:
    """Every question of a local QA file (or rows)."""
    return read_problems(data, qa_problem)


def load_corpus(path: str | Path) -> list[Doc]:
    """Every document of a local corpus file; errors name the line."""
    docs = []
    for where, row in iter_records(path):
        try:
            doc_id = str(row.get("id", len(docs)))
            if "contents" in row:
                docs.append(Doc.from_contents(doc_id, str(row["contents"])))
            else:
                docs.append(Doc(doc_id, str(row.get("title", "")), str(row["text"])))
        except KeyError:
            fields = ", ".join(sorted(row))
            raise ValueError(
                f"{where}: a document needs 'contents' or 'text' (fields: {fields})"
            ) from None
    if not docs:
        raise ValueError(f"corpus file {str(path)!r} has no documents")
    return docs
