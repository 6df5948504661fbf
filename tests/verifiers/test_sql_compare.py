"""Result comparison of execution grading: numbers, normalized types, columns, ties."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from decimal import Decimal

import pytest

from palaestra.verifiers.sql_compare import (
    MAX_COLUMN_ORDERS,
    cells_equal,
    normalize,
    results_equal_as_sets,
    results_match,
    tie_blocks,
)


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        (12_502_499, 12_502_500),  # SUM(id) off by one
        (1_516_197, 1_516_200),  # COUNT(*) off by three
        (1_000_004, 1_000_000),
        (1_000_004.0, 1_000_000),  # a float never rounds an integer difference away
        (12_502_499.0, 12_502_500),
        (2**53 + 1, 2**53),  # beyond float precision, integers still exact
        (Decimal("5.1"), 5),
        (1_900_620_676_901.0, 1_900_620_676_900),  # within float tolerance, not an integer
        (1_900_620_676_900, 1_900_620_676_901.0),
        (1e-17, 0),
        (0.3001, 0.3),
        ("5", 5),  # text is not a number
        (None, 0),
        ("2024-03-01", dt.date(2024, 3, 2)),
    ],
)
def test_different_values_do_not_match(predicted, gold):
    assert not results_match([(predicted,)], [(gold,)])


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        (5.0, 5),  # COUNT(*) * 1.0 on SQLite
        (Decimal("5.0"), 5),  # COUNT(*) * 1.0 on DuckDB
        (Decimal("190.62"), 190.62),  # ::DECIMAL(10,2)
        (0.1 + 0.2, 0.3),
        (1e-17, 0.0),
        (True, 1),
        (dt.date(2024, 3, 1), "2024-03-01"),  # DuckDB DATE vs SQLite text
        (dt.datetime(2024, 3, 1, 5, 15), "2024-03-01 05:15:00"),
        (float("nan"), float("nan")),
        (bytearray(b"ab"), b"ab"),
    ],
)
def test_equal_values_match_across_types(predicted, gold):
    assert results_match([(predicted,)], [(gold,)])


@pytest.mark.parametrize(
    ("predicted", "gold"),
    [
        ("None", None),
        ("1", b"1"),
        (b"1", "1"),
        ("1", 1),
        ("1.5", 1.5),
        ("(1, 2)", (1, 2)),
        ("True", True),
        ("b'1'", b"1"),
        ("2024-03-01", "2024-03-01 00:00:00"),
    ],
)
def test_non_numbers_compare_by_type_and_value_not_by_text(predicted, gold):
    assert not results_match([(predicted,)], [(gold,)])
    assert not results_match([(predicted, 7)], [(7, gold)])  # nor in another column
    assert not cells_equal(normalize(predicted), normalize(gold))


def test_tolerance_match_does_not_depend_on_sort_order():
    rng = random.Random(0)
    epsilon = 1e-12  # well inside the default relative tolerance at 1.0
    for _ in range(200):
        rows = [
            (rng.choice([1.0, 2.0]), float(rng.randint(0, 3)), rng.randint(0, 2)) for _ in range(8)
        ]
        nudged = [(a + rng.choice([0.0, epsilon, -epsilon]), b, c) for a, b, c in rows]
        rng.shuffle(nudged)
        assert results_match(nudged, rows)
        broken = list(nudged)
        broken[0] = (broken[0][0], broken[0][1] + 0.5, broken[0][2])
        assert not results_match(broken, rows)


def test_tolerance_is_relative():
    assert results_match([(1e12 + 1,)], [(1e12,)], float_tolerance=1e-9)
    assert not results_match([(1.0001,)], [(1.0,)], float_tolerance=1e-9)
    assert results_match([(1.0001,)], [(1.0,)], float_tolerance=1e-3)


@pytest.mark.parametrize("width", [1, 2, 6, 7, 9, 15])
def test_any_column_order_matches_at_any_width(width):
    rng = random.Random(width)
    gold = [tuple(rng.randint(0, 4) for _ in range(width)) for _ in range(40)]
    order = list(range(width))
    rng.shuffle(order)
    predicted = [tuple(row[j] for j in order) for row in gold]
    assert results_match(predicted, gold)
    wrong = [*predicted[:-1], tuple((v + 1) % 5 for v in predicted[-1])]
    assert not results_match(wrong, gold)


def test_columns_with_the_same_values_are_paired_by_rows():
    gold = [(1, 2, "x"), (2, 3, "y"), (3, 1, "z")]  # two columns hold the same values
    assert results_match([(2, 1, "x"), (3, 2, "y"), (1, 3, "z")], gold)  # swapped
    assert not results_match([(1, 3, "x"), (2, 1, "y"), (3, 2, "z")], gold)  # rows not whole


def test_columns_holding_the_same_values_are_paired_without_trying_every_order():
    rng = random.Random(7)
    base = [1] * 10 + [0] * 20
    columns = [rng.sample(base, len(base)) for _ in range(12)]  # all the same multiset
    gold = list(zip(*columns, strict=True))
    order = list(range(12))[::-1]
    predicted = [tuple(row[j] for j in order) for row in gold]
    assert len(list(itertools.permutations(range(8)))) > MAX_COLUMN_ORDERS
    assert results_match(predicted, gold)  # 12! orders; the prefixes that pair up are few
    broken = [list(row) for row in predicted]
    first, other = next((0, i) for i in range(1, 30) if broken[i][0] != broken[0][0])
    broken[first][0], broken[other][0] = broken[other][0], broken[first][0]  # same columns
    assert not results_match([tuple(row) for row in broken], gold)
    same = [tuple([1] * 12), tuple([2] * 12)]
    assert results_match(same[::-1], same)


def test_rows_are_a_multiset_unless_ordered():
    assert results_match([(2,), (1,), (1,)], [(1,), (1,), (2,)])
    assert not results_match([(1,), (2,)], [(1,), (1,), (2,)])
    assert not results_match([(1,), (2,), (2,)], [(1,), (1,), (2,)])
    assert not results_match([(2,), (1,)], [(1,), (2,)], ordered=True)


def test_ties_in_the_gold_order_accept_any_order_of_the_tied_rows():
    gold = [("a", 90), ("b", 80), ("c", 80), ("d", 70)]  # ORDER BY grade DESC: b and c tie
    finer = [("a", 90), ("c", 80), ("b", 80), ("d", 70)]
    assert not results_match(finer, gold, ordered=True)
    assert results_match(finer, gold, ordered=True, tie_blocks=[1, 2, 1])
    moved = [("c", 80), ("a", 90), ("b", 80), ("d", 70)]
    assert not results_match(moved, gold, ordered=True, tie_blocks=[1, 2, 1])
    with pytest.raises(ValueError, match="do not cover"):
        results_match(gold, gold, ordered=True, tie_blocks=[1, 1])


def test_tie_blocks_group_equal_keys():
    assert tie_blocks([(3,), (2,), (2,), (1,)]) == [1, 2, 1]
    assert tie_blocks([(Decimal("2.0"),), (2,)]) == [2]
    assert tie_blocks([]) == []


def test_floats_in_rows_do_not_misalign_exact_columns():
    gold = [(0.3, "b"), (0.1 + 0.2, "a")]
    predicted = [(0.1 + 0.2, "b"), (0.3, "a")]
    assert results_match(predicted, gold)


def test_empty_and_ragged_results():
    assert results_match([], [])
    assert not results_match([(1,)], [])
    assert not results_match([(1, 2)], [(1,)])


def test_normalize_nested_and_special_values():
    assert normalize([Decimal("1.0"), dt.time(5, 6)]) == (1, "05:06:00")
    assert normalize({"a": True}) == (("a", 1),)


def test_set_comparison_is_skyrl_and_birds():
    assert results_equal_as_sets([(1,), (1,), (2,)], [(2,), (1,)])  # duplicates ignored
    assert not results_equal_as_sets([(0.1 + 0.2,)], [(0.3,)])  # exact values
    assert not results_equal_as_sets([(2, "a")], [("a", 2)])  # columns in place
    assert results_equal_as_sets([(5.0,)], [(5,)])
