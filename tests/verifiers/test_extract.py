"""Answer extraction: the fast path of ``last_boxed`` agrees with the full brace scan."""

import random

import pytest

from palaestra.verifiers.extract import _last_boxed_by_scan, last_boxed

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
