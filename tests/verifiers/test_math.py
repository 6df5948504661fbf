"""The math verifier: the grading table, tiers, multiple golds, timeouts, hostile inputs."""

from __future__ import annotations

import os
import threading
from fractions import Fraction

import pytest

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

from palaestra.verifiers.math import (
    MathVerifier,
    default_verifier,
    normalize_answer,
    parse_number,
    verify,
)
from tests.verifiers.math_cases import ALL_CASES


def test_table_has_at_least_150_cases():
    assert len(ALL_CASES) >= 150
    assert len(set(ALL_CASES)) == len(ALL_CASES), "duplicate cases"


@pytest.mark.parametrize(("completion", "gold", "expected"), ALL_CASES)
def test_grading_table(completion: str, gold: str, expected: float):
    assert verify(completion, gold) == expected


def test_numbers_and_equal_strings_are_decided_without_the_symbolic_tier():
    grade = default_verifier().grade(r"\boxed{\frac{1}{2}}", "0.5")
    assert (grade.score, grade.method) == (1.0, "number")
    grade = default_verifier().grade(r"so \boxed{\text{Evelyn}}.", r"\text{Evelyn}")
    assert (grade.score, grade.method) == (1.0, "string")
    grade = default_verifier().grade("12 cm", "12")  # a completion that is one number
    assert (grade.score, grade.method) == (1.0, "number")
    grade = default_verifier().grade("1 2", "12")  # not one number: math-verify decides
    assert (grade.score, grade.method) == (0.0, "symbolic")


def test_expressions_use_the_symbolic_tier():
    grade = default_verifier().grade(r"\boxed{3\sqrt{2}}", r"\sqrt{18}")
    assert (grade.score, grade.method, grade.answer) == (1.0, "symbolic", r"3\sqrt{2}")


def test_missing_answer_is_reported():
    grade = default_verifier().grade("no idea", "42")
    assert (grade.score, grade.answer, grade.method) == (0.0, None, "no_answer")


def test_several_gold_answers_take_the_best_match():
    assert verify(r"\boxed{4}", ["3", "4"]) == 1.0
    assert verify(r"\boxed{5}", ["3", "4"]) == 0.0
    assert verify(r"\boxed{0.5}", [r"\frac{1}{2}"]) == 1.0


def test_numeric_gold_values_are_accepted():
    assert verify(r"\boxed{2.5}", 2.5) == 1.0
    assert verify(r"\boxed{\frac{5}{2}}", Fraction(5, 2)) == 1.0
    assert verify(r"\boxed{3}", 3) == 1.0
    assert verify(r"\boxed{3}", 4) == 0.0


def test_bad_gold_raises_with_a_clear_message():
    with pytest.raises(ValueError, match="non-empty"):
        verify(r"\boxed{3}", [])
    with pytest.raises(TypeError, match="gold answers must be str or numbers"):
        verify(r"\boxed{3}", [None])  # type: ignore[list-item]


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="timeout must be > 0"):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError, match="max_boxed must be >= 1"):
        MathVerifier(max_boxed=0)


def test_ordered_lists_is_an_explicit_policy():
    """MATH's checker treats a bare list's order as part of the answer; math-verify does not."""
    ordered = MathVerifier(ordered_lists=True)
    try:
        assert ordered(r"the roots are \boxed{10, 4, -2}", "10, 4, -2") == 1.0
        assert ordered(r"the roots are \boxed{4, 10, -2}", "10, 4, -2") == 0.0
        assert ordered("4, 10, -2", "10, 4, -2") == 0.0
        assert ordered(r"\boxed{\{4, 10, -2\}}", r"\{10, 4, -2\}") == 1.0  # braces: a set
    finally:
        ordered.close()
    assert verify(r"the roots are \boxed{4, 10, -2}", "10, 4, -2") == 1.0


def test_normalize_answer_examples():
    assert normalize_answer(r"$x = \dfrac{3}{4}\text{ cm}$") == r"\frac{3}{4}"
    assert normalize_answer(r"\$1,000.50") == "1000.50"
    assert normalize_answer(r"10,\!000") == "10000"  # MATH's thousands separator
    assert normalize_answer("0,111") == "0,111"  # not a thousands separator
    assert normalize_answer(r"\text{(b)}") == "B"
    assert normalize_answer("2pi") == "2pi"  # not a unit


def test_parse_number_examples():
    assert parse_number(r"2\frac{1}{2}") == Fraction(5, 2)
    assert parse_number(r"12.5\%") == Fraction(1, 8)
    assert parse_number("1e-3") == Fraction(1, 1000)
    assert parse_number("3/0") is None
    assert parse_number(r"\sqrt{2}") is None
    assert parse_number("1e999999") is None  # exponent too large for the exact tier


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_hostile_expression_times_out_and_kills_its_worker():
    verifier = MathVerifier(timeout=0.5, max_workers=1)
    try:
        assert verifier.grade(r"\boxed{\sqrt{2}}", "2", timeout=60).method == "symbolic"
        (pid,) = verifier._pool.pids
        threads_before = set(threading.enumerate())
        grade = verifier.grade(r"\boxed{9^{9^{9^{9}}}}", "2")
        assert (grade.score, grade.method) == (0.0, "timeout")
        assert not _alive(pid), "the timed-out worker must be killed and reaped"
        # no thread is left behind (threads of other tests may end meanwhile)
        assert set(threading.enumerate()) <= threads_before
        # the verifier keeps working with a fresh worker
        assert verifier(r"\boxed{3\sqrt{2}}", r"\sqrt{18}") == 1.0
        assert verifier._pool.pids != [pid]
    finally:
        verifier.close()


def test_timeout_holds_when_called_from_threads():
    verifier = MathVerifier(timeout=0.5, max_workers=2)
    results: list[str] = []

    def grade() -> None:
        results.append(verifier.grade(r"\boxed{9^{9^{9^{9}}}}", "2").method)

    try:
        threads = [threading.Thread(target=grade) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)  # includes starting two workers
        assert results == ["timeout", "timeout"]
    finally:
        verifier.close()


def test_per_call_timeout_override():
    grade = default_verifier().grade(r"\boxed{9^{9^{9^{9}}}}", "2", timeout=0.3)
    assert grade.method == "timeout"


@pytest.mark.parametrize(
    "completion",
    [
        "\\boxed{" * 200_000,
        "{" * 500_000 + "}" * 500_000,
        "1," * 300_000,
        "the answer is " * 50_000,
        "<answer>" * 100_000,
        "\\boxed{" + "9" * 100_000 + "}",
    ],
    ids=["unclosed-boxed", "deep-braces", "comma-number", "repeated-phrase", "open-tags", "long"],
)
def test_megabyte_garbage_is_decided_not_timed_out(completion: str):
    grade = default_verifier().grade(completion, "42")
    assert grade.score == 0.0
    assert grade.method != "timeout", "hostile text must be decided, not left to the timeout"
