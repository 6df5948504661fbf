r"""Wrong answers the math grader must reject: in RL a false positive is a reward hack.

Each trap comes with the honest answer it imitates, graded 1, so a grader that rejected
everything would fail here too.
"""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

from palaestra.verifiers.math import default_verifier, verify

MANY_NUMBERS = " ".join(str(n) for n in range(1, 2001))
MANY_BOXES = ". ".join(f"Maybe \\boxed{{{n}}}" for n in range(1, 51))

# (completion, gold): each must score 0
TRAPS = {
    "empty-box": (r"\boxed{}", "42"),
    "empty-box-after-the-answer": (r"It is 42, so \boxed{}", "42"),
    "blank-box": (r"The answer is \boxed{ }", "42"),
    "empty-answer-tag": ("<answer></answer>", "42"),
    "empty-completion": ("", "42"),
    "empty-gold-text": (r"\boxed{}", r"\boxed{}"),
    "permuted-pair": (r"\boxed{(1, 2)}", "(2, 1)"),
    "permuted-pair-unspaced": (r"\boxed{(1,2)}", "(2,1)"),
    "permuted-triple": (r"\boxed{(3, 1, 2)}", "(1, 2, 3)"),
    "permuted-point-bare": ("(7, 6)", "(6, 7)"),
    "digits-across-space": (r"\boxed{1 2}", "12"),
    "digits-across-space-sum": (r"\boxed{1 23}", "24"),
    "digits-across-space-join": (r"\boxed{1 23}", "123"),
    "digits-across-tab": ("\\boxed{4\t2}", "42"),
    "bad-thousands-group": (r"\boxed{12 34}", "1234"),
    "decimal-comma-vs-integer": (r"\boxed{0,111}", "111"),
    "decimal-comma-not-thousands": (r"\boxed{2,74}", "274"),
    "comma-list-vs-number": (r"\boxed{1,5}", "15"),
    "thousands-vs-decimal": (r"\boxed{1,234}", "1.234"),
    "list-gold-vs-decimal": (r"\boxed{2.74}", "2, 74"),
    "hedge-or-boxes": (r"\boxed{3} or \boxed{5}", "5"),
    "hedge-and-boxes": (r"\boxed{3} and \boxed{5}", "3"),
    "hedge-adjacent-boxes": (r"\boxed{1}\boxed{2}\boxed{3}", "3"),
    "hedge-many-boxes": (MANY_BOXES, "50"),
    "hedge-list-in-one-box": (r"\boxed{1, 2, 3, 4, 5}", "3"),
    "hedge-pm": (r"\boxed{\pm 2021}", "2021"),
    "huge-list-of-numbers": (MANY_NUMBERS, "1000"),
    "huge-list-in-box": (f"\\boxed{{{MANY_NUMBERS.replace(' ', ', ')}}}", "1000"),
    "inequality-bound-only": (r"\boxed{x \geq 5}", "5"),
    "interval-vs-endpoint": (r"\boxed{[5, \infty)}", "5"),
    "matrix-entry": (r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}", "4"),
    "pair-vs-coordinate": ("So the point is $(7, 6)$.", "6"),
    "answer-in-prompt-echo": ("The problem asks for 42 apples. I cannot solve it.", "41"),
    "sentence-final-answer": ("Final Answer: the number of cookies is not 12", "13"),
    "choice-hedge": (r"\boxed{B} or \boxed{C}", "B"),
    "wrong-choice": ("So the answer must be (C).", "B"),
}

# (completion, gold): the honest answers the traps imitate, each must score 1
HONEST = {
    "box": (r"\boxed{42}", "42"),
    "answer-then-empty-text": (r"It is \boxed{42}.", "42"),
    "ordered-pair": (r"\boxed{(2, 1)}", "(2,1)"),
    "thousands-space": (r"\boxed{12 345}", "12345"),
    "thousands-thin-space": (r"\boxed{12\,345}", "12345"),
    "thousands-math": (r"\boxed{10,\!000}", "10000"),
    "thousands-gold-math": (r"\boxed{10000}", r"10,\!000"),
    "thousands-comma": (r"\boxed{1,234}", "1234"),
    "decimal-comma": (r"\boxed{2,74}", "2.74"),
    "decimal-comma-gold": (r"\boxed{1.22}", "1,22"),
    "decimal-comma-zero": (r"\boxed{0,111}", "0.111"),
    "list": (r"\boxed{2, 74}", "2, 74"),
    "solutions-in-boxes": (r"x = \boxed{2} or x = \boxed{3}", "2, 3"),
    "repeated-box": (r"\boxed{7}. Double-checking gives \boxed{7} again.", "7"),
    "pm": (r"\boxed{\pm 2021}", r"\{-2021, 2021\}"),
    "inequality": (r"\boxed{x \geq 5}", "x >= 5"),
    "interval-as-inequality": (r"\boxed{[5, \infty)}", r"[5,\infty)"),
    "matrix": (
        r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}",
        r"\begin{pmatrix}1&2\\3&4\end{pmatrix}",
    ),
    "point": ("So the point is $(7, 6)$.", "(7,6)"),
    "choice": ("So the answer must be (B).", "B"),
}


@pytest.mark.parametrize(("completion", "gold"), TRAPS.values(), ids=TRAPS.keys())
def test_trap_is_rejected(completion: str, gold: str):
    grade = default_verifier().grade(completion, gold)
    assert grade.score == 0.0, grade


@pytest.mark.parametrize(("completion", "gold"), HONEST.values(), ids=HONEST.keys())
def test_honest_answer_is_accepted(completion: str, gold: str):
    grade = default_verifier().grade(completion, gold)
    assert grade.score == 1.0, grade


def test_hedging_is_reported():
    grade = default_verifier().grade(MANY_BOXES, "50")
    assert (grade.score, grade.method) == (0.0, "hedged")


def test_empty_last_box_is_no_answer_even_after_a_stated_one():
    grade = default_verifier().grade(r"The answer is 42. \boxed{}", "42")
    assert (grade.score, grade.answer, grade.method) == (0.0, None, "no_answer")


def test_a_list_gold_is_not_matched_by_one_of_its_elements():
    assert verify(r"\boxed{2}", "2, 3") == 0.0
    assert verify(r"\boxed{3, 2}", "2, 3") == 1.0
