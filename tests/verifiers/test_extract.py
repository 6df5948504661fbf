"""Answer extraction: the fast path of ``last_boxed`` agrees with the full brace scan, and
``boxed_contents`` lists every complete box."""

import random

import pytest

from palaestra.verifiers.extract import _last_boxed_by_scan, boxed_contents, last_boxed

PIECES = ["\\boxed{", "{", "}", "7", "x", " ", "\\frac", "\\"]


def test_last_boxed_agrees_with_the_brace_scan_on_random_text():
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        assert last_boxed(text) == _last_boxed_by_scan(text), text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no answer", None),
        ("\\boxed{25}", "25"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{3} and an unclosed \\boxed{4", "3"),
        ("{\\boxed{5}", "5"),
        ("\\boxed{}", ""),
    ],
)
def test_last_boxed_examples(text, expected):
    assert last_boxed(text) == expected


def test_boxed_contents_lists_every_complete_box_in_reading_order():
    text = r"\boxed{1} then \boxed{\frac{1}{\boxed{2}}} and \boxed{3"
    assert boxed_contents(text) == ["1", r"\frac{1}{\boxed{2}}", "2"]
    assert boxed_contents("no boxes {}") == []
    rng = random.Random(1)
    for _ in range(5_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        boxes = boxed_contents(text)
        assert (boxes[-1] if boxes else None) == last_boxed(text), text
