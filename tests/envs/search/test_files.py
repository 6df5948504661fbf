"""QA files in the NQ / HotpotQA / 2Wiki / Search-R1 layouts, and corpus files."""

from __future__ import annotations

import json

import pytest

from palaestra.envs.search.files import load_corpus, load_qa
from palaestra.tools.search import Doc


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "answers", "titles"),
    [
        (
            {"id": "nq-1", "question": "q?", "golden_answers": ["A", "a2"]},
            ("A", "a2"),
            (),
        ),  # Search-R1
        ({"question": "q?", "answer": ["A"]}, ("A",), ()),  # NQ-open
        (
            {
                "_id": "h",
                "question": "q?",
                "answer": "A",
                "type": "bridge",
                "supporting_facts": [["T1", 0], ["T2", 3], ["T1", 1]],
            },
            ("A",),
            ("T1", "T2"),
        ),  # HotpotQA / 2Wiki
        (
            {
                "id": "h",
                "question": "q?",
                "answer": "A",
                "supporting_facts": {"title": ["T1", "T2"], "sent_id": [0, 1]},
            },
            ("A",),
            ("T1", "T2"),
        ),  # HotpotQA on the Hugging Face hub
    ],
)
def test_qa_layouts(tmp_path, row, answers, titles):
    (problem,) = load_qa(write_jsonl(tmp_path / "qa.jsonl", [row]))
    assert problem.prompt == "Question: q?" and problem.answer == answers
    assert problem.metadata["evidence_titles"] == titles


def test_qa_errors_name_the_line(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}, {"question": "q"}])
    with pytest.raises(ValueError, match=r"qa\.jsonl line 2: no answer field"):
        load_qa(path)
    with pytest.raises(
        ValueError, match="line 1: field 'answer' must be a string or a non-empty list"
    ):
        load_qa(write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": []}]))


def test_corpus_layouts(tmp_path):
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"id": "0", "contents": '"Ada"\nA mathematician.'},
            {"id": "1", "title": "B", "text": "t"},
        ],
    )
    assert load_corpus(path) == [Doc("0", "Ada", "A mathematician."), Doc("1", "B", "t")]
    with pytest.raises(ValueError, match=r"corpus\.jsonl line 1: .*'contents' or 'text'"):
        load_corpus(write_jsonl(tmp_path / "corpus.jsonl", [{"id": "0", "body": "x"}]))
