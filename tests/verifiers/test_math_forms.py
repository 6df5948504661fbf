r"""Correct answers written in another form score 1; near misses in the same form score 0.

One table per form (:mod:`palaestra.verifiers.math_forms`, set conditions and rounded golds
in :mod:`palaestra.verifiers.math_symbolic`, choice letters in :mod:`palaestra.verifiers.math`),
each pairing the forms a competent solver writes with the near misses that imitate them: a
wrong component, a swapped ordered pair, another variable dependence, a rounding the gold
does not allow.
"""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

from palaestra.verifiers.math import MathVerifier, verify
from palaestra.verifiers.math_forms import definition, named_components, other_readings

Case = tuple[str, str, float]

NAMED_COMPONENTS: list[Case] = [
    (r"\boxed{x=16, y=3}", "16, 3", 1.0),
    (r"\boxed{Ann: 16, Bo: 3}", "16, 3", 1.0),
    (r"\boxed{\text{Ann}: 16, \text{Bo}: 3}", "16, 3", 1.0),
    (r"\boxed{Minimum: 1, Maximum: 3}", "1, 3", 1.0),
    (r"\boxed{T(1)=2, T(2)=4}", "2, 4", 1.0),
    (r"\boxed{7 \text{ apples and } 4 \text{ pears}}", "7, 4", 1.0),
    (r"\boxed{x=16, y=3}", "(16, 3)", 1.0),
    (r"\boxed{y=3, x=16}", "x=16, y=3", 1.0),  # matched by name
    (r"\boxed{x=16, y=4}", "16, 3", 0.0),  # a wrong component
    (r"\boxed{Minimum: 1, Maximum: 4}", "1, 3", 0.0),
    (r"\boxed{7 \text{ apples and } 5 \text{ pears}}", "7, 4", 0.0),
    (r"\boxed{x=3, y=16}", "(16, 3)", 0.0),  # a swapped ordered pair
    (r"\boxed{y=16, x=3}", "x=16, y=3", 0.0),  # values swapped between names
    (r"\boxed{x=16}", "16, 3", 0.0),  # a component missing
]

DEFINITIONS: list[Case] = [
    (r"\boxed{f(t)=2t+1}", "f(x)=2x+1", 1.0),
    (r"\boxed{2x+1}", "f(x)=2x+1", 1.0),
    (r"\boxed{f(m) = 2m + 1007}", "f(n) = 2 n+1007", 1.0),
    (r"\boxed{n^2-1}", "m = n^2-1", 1.0),
    (r"\boxed{n^{2}-n-1}", r"m_{\max }=n^{2}-n-1", 1.0),
    (r"\boxed{g(x)=2x+1}", "f(x)=2x+1", 1.0),  # the name of the function is free
    (r"\boxed{f(x)=2t+1}", "f(x)=2x+1", 0.0),  # another variable dependence
    (r"\boxed{2t+1}", "f(x)=2x+1", 0.0),
    (r"\boxed{f(t)=2t+2}", "f(x)=2x+1", 0.0),
    (r"\boxed{f(t)=2x+t}", "f(x)=3x", 0.0),  # renaming would merge two variables
    (r"\boxed{n^2+1}", "m = n^2-1", 0.0),
    (r"\boxed{x = 2x + 1}", "y = 2x + 1", 0.0),  # not a definition: x is on both sides
]

SETS_AND_INTERVALS: list[Case] = [
    (r"\boxed{(-1, 1)}", r"\{x \mid -1 < x < 1\}", 1.0),
    (r"\boxed{\{x \mid -1 < x < 1\}}", "(-1, 1)", 1.0),
    (r"\boxed{\left\{x | 2 < x < 3\right\}}", "(2, 3)", 1.0),
    (r"\boxed{(-\infty, -6) \cup (-6, \frac{3}{2})}", r"\{x | x < \frac{3}{2}\} - \{-6\}", 1.0),
    (r"\boxed{x<3 \text{ or } x>5}", r"(-\infty,3)\cup(5,\infty)", 1.0),
    (r"\boxed{4 < m \leq 8 \text{ or } 10 \leq m < 12}", r"(4, 8] \cup [10, 12)", 1.0),
    (r"\boxed{a \leq -2 \text{ or } a = 1}", r"(-\infty, -2] \cup \{1\}", 1.0),
    ("(-∞, -3) ∪ (3, +∞)", r"(-\infty, -3) \cup (3, \infty)", 1.0),
    (
        r"\boxed{\frac{\pi}{3}+n\pi, \frac{\pi}{6}+n\pi}",
        r"x=\frac{1}{6}\pi+\pi k, \frac{1}{3}\pi+\pi k",
        1.0,
    ),
    (r"\boxed{(2, 3)}", r"$\Big\{x | 2 < x < 3\Big\}$", 1.0),
    (r"\boxed{[-1, 1)}", r"\{x \mid -1 < x < 1\}", 0.0),
    (r"\boxed{(2, 4)}", r"$\Big\{x | 2 < x < 3\Big\}$", 0.0),
    (r"\boxed{(-\infty, \frac{3}{2})}", r"\{x | x < \frac{3}{2}\} - \{-6\}", 0.0),
    (r"\boxed{x<3 \text{ or } x>6}", r"(-\infty,3)\cup(5,\infty)", 0.0),
    (r"\boxed{x<3 \text{ and } x>5}", r"(-\infty,3)\cup(5,\infty)", 0.0),
    ("(-∞, -3] ∪ (3, +∞)", r"(-\infty, -3) \cup (3, \infty)", 0.0),
    (
        r"\boxed{\frac{\pi}{4}+n\pi, \frac{\pi}{6}+n\pi}",
        r"x=\frac{1}{6}\pi+\pi k, \frac{1}{3}\pi+\pi k",
        0.0,
    ),
]

VECTORS: list[Case] = [
    (r"\boxed{(-7, 16, 5)}", r"\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}", 1.0),
    (r"\boxed{\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}}", "(-7, 16, 5)", 1.0),
    (r"\boxed{\begin{bmatrix} 1 & 2 \end{bmatrix}}", "(1, 2)", 1.0),
    (r"\boxed{(-7, 5, 16)}", r"\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}", 0.0),
    (r"\boxed{(-7, 16)}", r"\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}", 0.0),
    (r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}", "(1, 2, 3, 4)", 0.0),
]

NUMBER_FORMS: list[Case] = [
    (r"\boxed{21\frac{13}{14}}", r"\frac{307}{14}", 1.0),
    ("21 \\frac{13}{14}", r"\frac{307}{14}", 1.0),
    (r"\boxed{20:3}", r"\frac{20}{3}", 1.0),
    (r"\boxed{12^{\mathrm{th}}}", "12", 1.0),
    ("15th Day", "15", 1.0),
    (r"\boxed{60^\circ 42'}", "60.7", 1.0),
    (r"\boxed{50\%}", "0.5", 1.0),
    (r"\boxed{30^\circ}", r"\frac{\pi}{6}", 1.0),  # degrees for radians
    (r"\boxed{C = \frac{2\pi}{3}}", r"120^\circ", 1.0),
    # a decimal gold of three or more significant digits is a rounded value
    (r"\boxed{\frac{600}{7}}", "85.71", 1.0),
    ("21 \\frac{13}{14}", "21.93", 1.0),
    (r"\boxed{20:3}", "6.67", 1.0),
    (r"\boxed{\sqrt{2}-1}", r"41.4\%", 1.0),
    (r"\boxed{\frac{1}{15}}", r"6.67\%", 1.0),
    (r"\boxed{21\frac{13}{14}}", r"\frac{305}{14}", 0.0),
    (r"\boxed{3:20}", r"\frac{20}{3}", 0.0),
    (r"\boxed{13^{\mathrm{th}}}", "12", 0.0),
    (r"\boxed{60^\circ 42'}", "60.42", 0.0),
    (r"\boxed{40\%}", "0.5", 0.0),
    (r"\boxed{60^\circ}", r"\frac{\pi}{6}", 0.0),
    (r"\boxed{30}", r"\frac{\pi}{6}", 0.0),  # no degree sign: not an angle
    (r"\boxed{\frac{600}{7}}", "85.72", 0.0),
    (r"\boxed{86}", "85.71", 0.0),  # an integer is not a rounding of 85.71
    (r"\boxed{85.7}", "85.71", 0.0),  # nor a coarser decimal
    (r"\boxed{\frac{63}{248}}", "0.25", 0.0),  # 0.25 is read as exact
    (r"\boxed{0.333}", r"\frac{1}{3}", 0.0),  # an exact gold asks for the exact value
    (r"\boxed{85.71}", r"\frac{600}{7}", 0.0),
    (r"\boxed{\sqrt{2}-1}", r"41.5\%", 0.0),
]

CHOICES_IN_WORDS: list[Case] = [
    ("The answer is C.", "C", 1.0),
    ("C. Because the slope is positive, only this graph fits.", "C", 1.0),
    ("Option (A) fails at x = 0. The answer is C.", "C", 1.0),
    ("**D**", "D", 1.0),
    ("The answer is C.", "B", 0.0),
    ("C. Because the slope is positive, only this graph fits.", "B", 0.0),
    ("Option (A) fails at x = 0. The answer is C.", "A", 0.0),
]

ALL_FORMS = {
    "named": NAMED_COMPONENTS,
    "definition": DEFINITIONS,
    "set": SETS_AND_INTERVALS,
    "vector": VECTORS,
    "number": NUMBER_FORMS,
    "choice": CHOICES_IN_WORDS,
}
CASES = [
    pytest.param(*case, id=f"{kind}-{index}")
    for kind, cases in ALL_FORMS.items()
    for index, case in enumerate(cases)
]


@pytest.mark.parametrize(("completion", "gold", "expected"), CASES)
def test_answer_forms(completion: str, gold: str, expected: float):
    assert verify(completion, gold) == expected


def test_every_form_has_correct_answers_and_near_misses():
    for kind, cases in ALL_FORMS.items():
        assert {expected for _, _, expected in cases} == {0.0, 1.0}, kind


def test_order_matters_for_tuples_and_named_components_not_for_solution_sets():
    assert verify(r"\boxed{(3, 16)}", "(16, 3)") == 0.0  # an ordered tuple
    assert verify(r"\boxed{\{3, 16\}}", r"\{16, 3\}") == 1.0  # a set
    assert verify(r"the solutions are \boxed{3, 16}", "16, 3") == 1.0  # a bare list: a set
    ordered = MathVerifier(ordered_lists=True)
    try:
        assert ordered(r"the sequence is \boxed{3, 16}", "16, 3") == 0.0
        assert ordered(r"\boxed{x=16, y=3}", "16, 3") == 1.0  # in the order written
        assert ordered(r"\boxed{y=3, x=16}", "16, 3") == 0.0
    finally:
        ordered.close()


def test_rewrites_keep_what_they_cannot_read():
    assert named_components("x=1") is None  # one part is not a list
    assert named_components("x=1, 2+3") is None  # every part must be named
    assert named_components("f(x)=x+1, g(x)=1") is None  # definitions, not values
    assert definition("x+y=3") is None
    assert definition("x = 2x") is None
    assert other_readings("3", "3") == []
    assert other_readings("x" * 3000, "3") == []


def test_a_rounded_answer_against_an_exact_gold_is_an_option():
    assert verify(r"\boxed{85.71}", r"\frac{600}{7}") == 0.0
    lenient = MathVerifier(rel_tol=1e-4)  # as Qwen2.5-Math's checker
    try:
        assert lenient(r"\boxed{85.71}", r"\frac{600}{7}") == 1.0
        assert lenient(r"\boxed{85.7}", r"\frac{600}{7}") == 0.0
    finally:
        lenient.close()
