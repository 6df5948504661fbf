"""When two query results are the same answer (the rules of execution grading).

>>> results_match([(2, "b"), (1, "a")], [("a", 1), ("b", 2)])
True
>>> results_match([(12502499,)], [(12502500,)])
False

* **values** (after :func:`normalize`): NULL equals only NULL; an integer on either side
  compares exactly, whatever the other side's type (``5 == 5.0``, but
  ``1900620676900 != 1900620676901.0``), and so do two decimals; otherwise (a float on
  either side) :func:`math.isclose` with relative tolerance ``float_tolerance`` (and an
  absolute one of :data:`ABSOLUTE_TOLERANCE` near zero), and rows are paired by a
  matching, so a tolerance match never depends on how the rows sort; dates and times as ISO text, the way SQLite
  stores them (``2024-03-01``, ``2024-03-01 05:15:00``); text and blobs exactly, and
  text never equals a number;
* **rows** are a multiset (duplicates count, order free) unless the gold query orders
  its rows: then the order must match, except that rows the gold's ``ORDER BY`` keys
  tie on may come in any order (``tie_blocks``);
* **columns** may come in any order, at any width: each predicted column is matched to
  the gold columns holding the same multiset of values, and only those pairings are
  tried; where several columns hold the same values, an order is built column by column,
  keeping only prefixes whose partial rows form the gold's multiset (at most
  :data:`MAX_COLUMN_ORDERS` complete orders are tried). Column names never matter.

:func:`results_equal_as_sets` is SkyRL-SQL's and BIRD's rule instead: the results as sets
of rows (duplicates and order ignored), values compared exactly, columns in place.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

DEFAULT_FLOAT_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-12
_ORDER_BY = re.compile(r"order(?:\s|/\*.*?\*/|--[^\n]*\n)+by", re.IGNORECASE | re.DOTALL)
MAX_MATCHED_ROWS = 300
"""The largest group of rows (equal on their exact columns) paired by a matching."""
MAX_COLUMN_ORDERS = 5040
"""Column orders tried at most when several columns hold the same values (7!)."""

Row = tuple[Any, ...]


def normalize(value: Any) -> Any:
    """A cell as the matcher sees it: bool -> int, an integral ``Decimal`` -> int, dates
    and times -> ISO text (SQLite's form), UUIDs -> text, buffers -> bytes, lists and
    structs (DuckDB) -> tuples of normalized cells."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return int(value) if value.is_finite() and value == value.to_integral_value() else value
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list | tuple):
        return tuple(normalize(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, normalize(v)) for k, v in value.items())
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal)


def cells_equal(a: Any, b: Any, tolerance: float = DEFAULT_FLOAT_TOLERANCE) -> bool:
    """Whether two normalized cells are equal (rules in the module docstring).

    >>> cells_equal(1_900_620_676_900, 1_900_620_676_901.0), cells_equal(5, 5.0)
    (False, True)
    """
    if _is_number(a) and _is_number(b):
        exact = isinstance(a, int) or isinstance(b, int)  # whatever the other side's type
        if exact or not (isinstance(a, float) or isinstance(b, float)):
            return a == b
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=tolerance, abs_tol=ABSOLUTE_TOLERANCE)
    return type(a) is type(b) and a == b


def _sort_key(value: Any) -> tuple[int, Any]:
    """Orders any normalized cells: NULL, numbers (by value), NaN, text, blobs, the rest."""
    if value is None:
        return (0, 0)
    if _is_number(value):
        return (2, 0) if isinstance(value, float) and math.isnan(value) else (1, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, bytes):
        return (4, value)
    return (5, repr(value))


def _same_multiset(left: Sequence[Row], right: Sequence[Row], tolerance: float) -> bool:
    """Rows equal as multisets. Both are sorted with the columns holding floats last and
    compared pairwise (enough, and fast, unless float tolerance reorders rows); failing
    that, rows that agree on their exact columns are paired by a matching
    (:func:`_float_parts_match`)."""
    if len(left) != len(right):
        return False
    if len(left) == 1:
        return _rows_equal(left[0], right[0], tolerance)
    width = len(left[0])
    floats = [j for j in range(width) if any(isinstance(r[j], float) for r in (*left, *right))]
    exact = [j for j in range(width) if j not in floats]

    def key(row: Row) -> tuple[tuple[int, Any], ...]:
        return tuple(_sort_key(row[j]) for j in exact + floats)

    if all(
        _rows_equal(a, b, tolerance)
        for a, b in zip(sorted(left, key=key), sorted(right, key=key), strict=True)
    ):
        return True
    return bool(floats) and _float_parts_match(left, right, exact, floats, tolerance)


def _float_parts_match(
    left: Sequence[Row],
    right: Sequence[Row],
    exact: list[int],
    floats: list[int],
    tolerance: float,
) -> bool:
    """Rows grouped by their exact columns (the groups must agree as multisets), then each
    group's float parts paired by a maximum bipartite matching (groups of at most
    :data:`MAX_MATCHED_ROWS` rows; a larger group keeps the sorted pairing's verdict)."""
    groups: dict[tuple[Any, ...], tuple[list[Row], list[Row]]] = {}
    for side, rows in enumerate((left, right)):
        for row in rows:
            groups.setdefault(tuple(row[j] for j in exact), ([], []))[side].append(
                tuple(row[j] for j in floats)
            )
    return all(
        len(mine) == len(theirs)
        and len(mine) <= MAX_MATCHED_ROWS
        and _perfect_matching(mine, theirs, tolerance)
        for mine, theirs in groups.values()
    )


def _perfect_matching(left: list[Row], right: list[Row], tolerance: float) -> bool:
    """Whether every row of ``left`` pairs with its own equal row of ``right`` (Kuhn's
    augmenting paths)."""
    edges = [[k for k, b in enumerate(right) if _rows_equal(a, b, tolerance)] for a in left]
    owner: list[int | None] = [None] * len(right)

    def augment(i: int, seen: set[int]) -> bool:
        for k in edges[i]:
            if k not in seen:
                seen.add(k)
                taken = owner[k]
                if taken is None or augment(taken, seen):
                    owner[k] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(left)))


def _rows_equal(a: Row, b: Row, tolerance: float) -> bool:
    return all(cells_equal(x, y, tolerance) for x, y in zip(a, b, strict=True))


def _blocks_equal(
    predicted: Sequence[Row], gold: Sequence[Row], blocks: Sequence[int], tolerance: float
) -> bool:
    """Row order matches block by block; rows within a block may come in any order."""
    start = 0
    for size in blocks:
        end = start + size
        if size == 1:
            if not _rows_equal(predicted[start], gold[start], tolerance):
                return False
        elif not _same_multiset(predicted[start:end], gold[start:end], tolerance):
            return False
        start = end
    return True


@dataclass(frozen=True)
class _Column:
    """A column's values split into a hashable part (non-numbers) and sorted numbers."""

    others: frozenset[tuple[Any, int]]
    numbers: tuple[Any, ...]

    @classmethod
    def of(cls, rows: Sequence[Row], index: int) -> _Column:
        values = [row[index] for row in rows]
        others = Counter(v for v in values if not _is_number(v))
        numbers = sorted((v for v in values if _is_number(v)), key=_sort_key)
        return cls(frozenset(others.items()), tuple(numbers))

    def matches(self, other: _Column, tolerance: float) -> bool:
        return (
            self.others == other.others
            and len(self.numbers) == len(other.numbers)
            and all(
                cells_equal(a, b, tolerance)
                for a, b in zip(self.numbers, other.numbers, strict=True)
            )
        )


def _column_orders(
    predicted: Sequence[Row], gold: Sequence[Row], tolerance: float
) -> Iterator[tuple[int, ...]]:
    """Column orders (gold column k <- predicted column ``order[k]``) worth trying: each
    pairs columns holding the same multiset of values, and when several columns could pair,
    every prefix of the order must give the gold's multiset of partial rows. Identical
    predicted columns count as one; at most :data:`MAX_COLUMN_ORDERS` are yielded."""
    width = len(gold[0])
    vectors = [tuple(row[j] for row in predicted) for j in range(width)]
    first_of: dict[tuple[Any, ...], int] = {}
    twins = [first_of.setdefault(vector, j) for j, vector in enumerate(vectors)]
    pred_columns = [_Column.of(predicted, j) for j in range(width)]
    gold_columns = [_Column.of(gold, k) for k in range(width)]
    candidates = [
        sorted(
            (j for j in range(width) if pred_columns[j].matches(gold_columns[k], tolerance)),
            key=lambda j, k=k: j != k,  # the given order first
        )
        for k in range(width)
    ]
    ambiguous = any(len(options) > 1 for options in candidates)
    order: list[int] = []
    yielded = 0

    def consistent() -> bool:
        size = len(order)
        partial = [tuple(row[j] for j in order) for row in predicted]
        return _same_multiset(partial, [row[:size] for row in gold], tolerance)

    def extend() -> Iterator[tuple[int, ...]]:
        nonlocal yielded
        if len(order) == width:
            yielded += 1
            yield tuple(order)
            return
        tried = set()
        for j in candidates[len(order)]:
            if j in order or twins[j] in tried or yielded >= MAX_COLUMN_ORDERS:
                continue
            tried.add(twins[j])
            order.append(j)
            if not ambiguous or consistent():
                yield from extend()
            order.pop()

    yield from extend()


def results_match(
    predicted: Sequence[Sequence[Any]],
    gold: Sequence[Sequence[Any]],
    *,
    ordered: bool = False,
    float_tolerance: float = DEFAULT_FLOAT_TOLERANCE,
    tie_blocks: Sequence[int] | None = None,
) -> bool:
    """Whether ``predicted`` is the same answer as ``gold`` (rules in the module docstring).

    ``ordered``: the gold query orders its rows; ``tie_blocks`` then gives the sizes of the
    runs of consecutive gold rows its ``ORDER BY`` keys tie on (None: every row its own).
    """
    if len(predicted) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(row) != width for row in (*predicted, *gold)):
        return False
    blocks = (list(tie_blocks) if tie_blocks else [1] * len(gold)) if ordered else None
    if blocks is not None and sum(blocks) != len(gold):
        raise ValueError(f"tie_blocks {blocks} do not cover the {len(gold)} gold rows")
    if _plainly_equal(predicted, gold, ordered):
        return True
    pred_rows = [tuple(normalize(v) for v in row) for row in predicted]
    gold_rows = [tuple(normalize(v) for v in row) for row in gold]
    if _plainly_equal(pred_rows, gold_rows, ordered):  # DuckDB's dates as SQLite's text
        return True
    for order in _column_orders(pred_rows, gold_rows, float_tolerance):
        permuted = [tuple(row[j] for j in order) for row in pred_rows]
        if blocks is None:
            if _same_multiset(permuted, gold_rows, float_tolerance):
                return True
        elif _blocks_equal(permuted, gold_rows, blocks, float_tolerance):
            return True
    return False


def _plainly_equal(
    predicted: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], ordered: bool
) -> bool:
    """Equal as Python values, in order (or as multisets when order is free): enough for a
    match under every rule above, and far cheaper than checking them (the common case)."""
    left, right = [tuple(row) for row in predicted], [tuple(row) for row in gold]
    if left == right:
        return True
    if ordered:
        return False
    try:
        return Counter(left) == Counter(right)
    except TypeError:  # an unhashable value (a DuckDB list): take the long way
        return False


def results_equal_as_sets(
    predicted: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]]
) -> bool:
    """SkyRL-SQL's (and BIRD's) comparison: ``set(predicted) == set(gold)`` over rows of
    normalized values (exact, columns in place, duplicates and order ignored)."""
    as_set = lambda rows: frozenset(tuple(normalize(v) for v in row) for row in rows)  # noqa: E731
    return as_set(predicted) == as_set(gold)


def tie_blocks(keys: Sequence[Row]) -> list[int]:
    """Sizes of the runs of equal consecutive ``keys`` (the ORDER BY values of gold rows).

    >>> tie_blocks([(3,), (2,), (2,), (1,)])
    [1, 2, 1]
    """
    blocks: list[int] = []
    previous: object = object()
    for key in keys:
        normalized = tuple(normalize(v) for v in key)
        if blocks and normalized == previous:
            blocks[-1] += 1
        else:
            blocks.append(1)
        previous = normalized
    return blocks


@dataclass(frozen=True)
class KeyedQuery:
    """A gold query rewritten to also return its ORDER BY values: ``sql`` returns the
    gold's columns, then ``extra`` more; ``keys`` locates each ORDER BY term: an index into
    the gold's columns, or ``-n`` for the n-th extra column."""

    sql: str
    keys: tuple[int, ...]
    extra: int

    def split(self, rows: Sequence[Row]) -> tuple[list[Row], list[Row]]:
        """The gold's columns and the ORDER BY values of each row of this query's result."""
        width = len(rows[0]) - self.extra if rows else 0
        columns = [tuple(row[:width]) for row in rows]
        keys = [tuple(row[k] if k >= 0 else row[width - k - 1] for k in self.keys) for row in rows]
        return columns, keys


@functools.lru_cache(maxsize=4096)
def orders_rows(sql: str) -> bool:
    """Whether the outermost statement of ``sql`` (SQLite) has an ORDER BY (its row order
    is part of the answer). Most queries have no ORDER BY anywhere and skip parsing."""
    if not _ORDER_BY.search(sql):
        return False
    tree = _outermost(sql)
    return tree is not None and tree.args.get("order") is not None


@functools.lru_cache(maxsize=4096)
def has_limit(sql: str) -> bool:
    """Whether the outermost statement of ``sql`` (SQLite) keeps only some rows (LIMIT):
    on a database where rows tie at the cut its answer is not decided."""
    if "limit" not in sql.lower():
        return False
    tree = _outermost(sql)
    return tree is None or tree.args.get("limit") is not None


@functools.lru_cache(maxsize=4096)
def keyed_query(sql: str) -> KeyedQuery | None:
    """``sql`` (SQLite) with its ORDER BY terms as extra columns, or None when it has no
    ORDER BY or a term cannot be located (a set operation ordered by an expression)."""
    from sqlglot import exp

    tree = _outermost(sql)
    if tree is None or tree.args.get("order") is None:
        return None
    tree = tree.copy()
    names = [p.alias_or_name.lower() for p in _first_select(tree).expressions]
    added: list[Any] = []
    keys = []
    for ordered in tree.args["order"].expressions:
        position = _output_position(ordered.this, names)
        if position is None:
            if not isinstance(tree, exp.Select):
                return None
            added.append(exp.alias_(ordered.this.copy(), f"palaestra_key_{len(added)}"))
            position = -len(added)
        keys.append(position)
    if added:
        tree.set("expressions", [*tree.expressions, *added])
    return KeyedQuery(tree.sql(dialect="sqlite"), tuple(keys), len(added))


def _output_position(term: Any, names: list[str]) -> int | None:
    """The output column an ORDER BY term names (an ordinal or a result column's name)."""
    from sqlglot import exp

    if isinstance(term, exp.Literal) and term.is_int:
        return int(term.this) - 1
    if isinstance(term, exp.Column) and not term.table and term.name.lower() in names:
        return names.index(term.name.lower())
    return None


def _outermost(sql: str) -> Any:
    """The parsed outermost query of ``sql`` (parentheses removed), or None."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return None
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return tree


def _first_select(tree: Any) -> Any:
    from sqlglot import exp

    while isinstance(tree, exp.SetOperation | exp.Subquery):
        tree = tree.this
    return tree
