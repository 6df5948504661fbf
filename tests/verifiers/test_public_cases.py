"""Math grading on labelled cases from other projects' test suites, side by side with
math-verify called directly.

``public_cases.jsonl`` holds one case a line: ``completion``, ``gold`` (a string or a list
of acceptable answers), ``label`` (1 correct, 0 wrong), and where it comes from: ``source``,
``repo``, ``path`` and ``line`` (an optional ``note`` explains a corrected label). Sources,
at the commits the cases were read from, all under licences that allow shipping them:

| source | repo @ commit | licence |
| --- | --- | --- |
| math-verify | huggingface/Math-Verify @ 5d148cf | Apache-2.0 |
| hendrycks-math | hendrycks/math @ 985bdc1 | MIT |
| tinyv (HardVerify-Math) | uw-nsl/TinyV @ 4a9d2c7 | MIT |
| qwen2.5-math | QwenLM/Qwen2.5-Math @ a45202b (evaluation/, hand-labelled) | MIT |
| open-r1 | huggingface/open-r1 @ 1416fa0 | Apache-2.0 |
| skyrl | NovaSky-AI/SkyRL @ a956457 | Apache-2.0 |
| rllm | agentica-project/rllm @ 874daa4 | MIT |

Run ``pytest tests/verifiers/test_public_cases.py -s`` to see the per-source table.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

from math_verify import parse
from math_verify import verify as mv_verify

from palaestra.verifiers.math import MathGrade, MathVerifier
from palaestra.verifiers.math_symbolic import symbolic_grade

CASES_PATH = Path(__file__).with_name("public_cases.jsonl")
CASES = [json.loads(line) for line in CASES_PATH.read_text().splitlines()]


def math_verify_direct(completion: str, gold: str | list[str]) -> float:
    """math-verify as its README calls it (its own signal-based timeouts: main thread)."""
    golds = gold if isinstance(gold, list) else [gold]
    try:
        return float(any(mv_verify(parse(g), parse(completion)) for g in golds))
    except Exception:  # a grader that raises got the case wrong
        return 0.0


@pytest.fixture(scope="module")
def graded() -> list[tuple[dict, MathGrade, float]]:
    """(case, palaestra's grade, math-verify's score) for every case. palaestra grades in
    its worker processes while math-verify runs here, so the two overlap. math-verify bounds
    the gold's parse, the answer's parse and the comparison at 5 s each; palaestra gets the
    same 15 s for the whole call, so a loaded machine slows both alike."""
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    verifier = MathVerifier(max_workers=2, timeout=15)
    try:
        with ThreadPoolExecutor(2) as pool:
            ours = pool.map(lambda c: verifier.grade(c["completion"], c["gold"]), CASES)
            theirs = [math_verify_direct(c["completion"], c["gold"]) for c in CASES]
            return list(zip(CASES, ours, theirs, strict=True))
    finally:
        verifier.close()


@pytest.fixture(scope="module")
def verdicts(graded) -> list[tuple[dict, float, float]]:
    """(case, palaestra score, math-verify score) for every case."""
    return [(case, grade.score, theirs) for case, grade, theirs in graded]


def _table(verdicts: list[tuple[dict, float, float]]) -> dict[str, Counter]:
    table: dict[str, Counter] = {}
    for case, ours, theirs in verdicts:
        for source in (case["source"], "all"):
            row = table.setdefault(source, Counter())
            row["cases"] += 1
            row["palaestra"] += ours == case["label"]
            row["math-verify"] += theirs == case["label"]
            row["palaestra FP"] += ours == 1 and case["label"] == 0
            row["math-verify FP"] += theirs == 1 and case["label"] == 0
    return table


def test_cases_are_well_formed_and_sourced():
    assert len(CASES) >= 700
    for case in CASES:
        assert case["label"] in (0, 1)
        assert isinstance(case["completion"], str)
        assert isinstance(case["gold"], str | list)
        assert case["repo"].count("/") == 1 and case["path"] and case["line"] >= 1
    keys = [(c["completion"], json.dumps(c["gold"]), c["source"]) for c in CASES]
    assert len(set(keys)) == len(keys), "duplicate cases"
    assert {c["source"] for c in CASES} >= {"math-verify", "tinyv", "hendrycks-math"}


def test_palaestra_agrees_at_least_as_often_as_math_verify(verdicts):
    table = _table(verdicts)
    columns = ["cases", "palaestra", "math-verify", "palaestra FP", "math-verify FP"]
    print("\n" + " | ".join(["source", *columns]))
    for source, row in sorted(table.items(), key=lambda item: item[0] == "all"):
        print(" | ".join([source, *(str(row[c]) for c in columns)]))
    for source, row in table.items():
        assert row["palaestra"] >= row["math-verify"], (source, row)
    assert table["all"]["palaestra FP"] <= table["all"]["math-verify FP"], table["all"]


def test_the_in_process_tier_decides_only_where_math_verify_agrees_or_is_wrong(graded):
    """Every case the exact tier decided gets the same verdict from the math-verify tier,
    unless the math-verify tier contradicts the label."""
    decided = [
        (case, grade) for case, grade, _ in graded if grade.method in ("number", "string", "choice")
    ]
    assert len(decided) >= 30
    for case, grade in decided:
        golds = case["gold"] if isinstance(case["gold"], list) else [case["gold"]]
        symbolic = any(symbolic_grade(case["completion"], g)[0] for g in golds)
        assert grade.score == symbolic or grade.score == case["label"], (case, grade)
