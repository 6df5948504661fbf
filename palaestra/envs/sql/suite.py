"""Test-suite databases made to tell a gold query from its near misses (fuzzed copies).

>>> paths = fuzzed_paths(database_path("shop", 0), gold_sql, 2)  # doctest: +SKIP

Databases of other seeds rarely hold a witness for a near miss: a question's literals come
from its episode's data (a city, a price bound, a year), and another seed has other rows
there. As Zhong et al. 2020 ("Semantic Evaluation for Text-to-SQL with Distilled Test
Suites") do, the databases here are *made* to distinguish: copies of the episode's database
whose rows near the gold query are moved onto the places where near misses part from it:

* number and date columns the gold reads take its literals and one step either side (the
  column's own grid: 1 for years and counts, 5 for delays kept in fives; a day for a date,
  a year's first and last days and their neighbours for a year or month literal), so
  ``>`` for ``>=`` or a year bound that skips a day meets a row on the bound; the other
  dates of a moved row move with it (a return stays after its loan);
* text columns the gold reads get other rows' values (duplicates, so a missing
  ``DISTINCT`` shows) and the gold's own text literals (a city the question names);
* nullable columns that hold NULLs already get a few more.

"Near the gold" (:func:`rows_in_scope`): the rows that hold one of its literals, and rows
that reference them by a foreign key (the orders of the customers of the city asked
about). Keys (primary, foreign, unique) never change, NOT NULL columns never become NULL,
a text column whose values are all distinct stays so, and each domain's invariants hold
(:data:`KEEP` columns are left alone, :data:`REPAIR` statements restore derived ones: an
order line's unit price is its product's price), so an equivalent rewrite that relies on
them still scores 1. The edits are drawn from a seed of (database, gold, index), so every
process writes the same file; it is written like a generated database (a temporary file
renamed into ``fuzzed/`` beside the episode's, read-only) and reused by every check of the
question, which is what a GRPO group of answers to one question needs. The folder keeps at
most :data:`MAX_FUZZED_DATABASES` files besides those in use, as the generated databases'
does (:mod:`palaestra.envs.sql.databases`: ``hold=``, and a copy that went is built again
when it is next opened, from the recipe this process kept).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import math
import re
import shutil
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from palaestra.envs.sql.databases import cached_file, suite_paths, write_read_only
from palaestra.envs.sql.domains.flights import FARE_FACTOR
from palaestra.verifiers.sql import FileHold, add_rebuilder
from palaestra.verifiers.sql_compare import has_limit

__all__ = [
    "FUZZ_VERSION",
    "KEEP",
    "MAX_FUZZED_DATABASES",
    "REPAIR",
    "GoldFacts",
    "fuzz",
    "fuzzed_path",
    "fuzzed_paths",
    "gold_facts",
    "grading_suite",
    "rows_in_scope",
]

FUZZ_VERSION = 2
"""Part of every fuzzed file's name: a change to the edits makes new files."""
MAX_FUZZED_DATABASES = 256
"""Fuzzed databases kept in one ``fuzzed/`` folder besides those in use (each about the
size of its source)."""
RECIPES = 4096
"""Fuzzed copies this process remembers how to build again (:func:`fuzzed_path`'s
arguments), should one go while it is wanted."""
SHARE = 0.25
"""Of the rows near the gold, the share each column edits (at least one per witness)."""
MAX_EDITS = 64
"""The most rows one kind of edit changes in one column."""
MIN_NEAR = 8
"""Rows near the gold a table's edits draw from, at least (:func:`rows_in_scope`)."""
KEEP: dict[str, frozenset[str]] = {
    "shop": frozenset({"order_items.unit_price", "customers.email"}),
    "school": frozenset({"courses.department", "teachers.department"}),
    "flights": frozenset({"airports.*", "airlines.*", "bookings.paid", "bookings.seat_class"}),
    "hospital": frozenset(),
    "library": frozenset(),
}
"""Per domain, the columns (``table.column``, ``table.*``) a fuzzed copy leaves as
generated: fixed reference tables, and values derived from others (repaired instead)."""
REPAIR: dict[str, tuple[str, ...]] = {
    "shop": (
        "UPDATE order_items SET unit_price = "
        "(SELECT price FROM products WHERE products.id = order_items.product_id)",
    ),
    "flights": (
        "UPDATE bookings SET paid = ROUND((SELECT price FROM flights WHERE flights.id = "
        "bookings.flight_id) * CASE seat_class "
        + " ".join(f"WHEN '{seat}' THEN {factor}" for seat, factor in FARE_FACTOR.items())
        + " END, 2)",
    ),
}
"""Per domain, statements that restore derived values after the edits (an order line's
unit price is its product's price; a booking pays its flight's fare times its class's
factor)."""

_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Like)


@dataclass(frozen=True)
class GoldFacts:
    """What a gold query reads and compares: its tables, the columns it reads (as
    ``(table, column)``, table ``""`` where the query does not say, ``("", "*")`` for a
    star), and the literals each column is compared with (a number, or text: a date, a
    year-month or a year is text here too)."""

    tables: frozenset[str]
    read: frozenset[tuple[str, str]]
    literals: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)

    def reads(self, table: str, column: str) -> bool:
        keys = {(table.lower(), column.lower()), ("", column.lower()), ("", "*")}
        return bool(keys & self.read)

    def compared(self, table: str, column: str) -> list[Any]:
        """The literals ``table.column`` is compared with."""
        found = self.literals.get((table.lower(), column.lower()), ())
        return [*found, *self.literals.get(("", column.lower()), ())]


@dataclass
class _Column:
    table: str
    name: str
    kind: str  # "int", "real", "date", "datetime" or "text"
    nullable: bool
    values: dict[int, Any] = field(default_factory=dict)  # by rowid


def gold_facts(gold_sql: str) -> GoldFacts:
    """The tables, columns and compared literals of ``gold_sql`` (SQLite), read with
    sqlglot: a literal belongs to every column of the comparison it sits in
    (``strftime('%Y', loan_date) = '2023'``: ``loan_date`` with ``'2023'``; a function's
    format argument is not a value)."""
    tree = sqlglot.parse_one(gold_sql, read="sqlite")
    tables = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table)}

    def key(column: exp.Column) -> tuple[str, str]:
        return tables.get(column.table.lower(), ""), column.name.lower()

    read = {key(column) for column in tree.find_all(exp.Column)}
    if any(isinstance(star.parent, exp.Select) for star in tree.find_all(exp.Star)):
        read.add(("", "*"))
    literals: dict[tuple[str, str], list[Any]] = {}
    for comparison in tree.find_all(*_COMPARISONS):
        values = [_value(literal) for literal in comparison.find_all(exp.Literal)]
        values = [v for v in values if v is not None]
        for column in comparison.find_all(exp.Column):
            literals.setdefault(key(column), []).extend(values)
    return GoldFacts(
        frozenset(tables.values()),
        frozenset(read),
        {column: tuple(values) for column, values in literals.items() if values},
    )


def _value(literal: exp.Literal) -> Any:
    """A literal's value: a float, or text (None for a strftime format or a LIKE's %)."""
    if literal.is_string:
        text = literal.this
        return None if "%" in text else text
    try:
        number = float(literal.this)
    except ValueError:
        return None
    return -number if isinstance(literal.parent, exp.Neg) else number


def _kind(declared: str) -> str:
    declared = declared.upper()
    if "DATETIME" in declared or "TIMESTAMP" in declared:
        return "datetime"
    if "DATE" in declared:
        return "date"
    if "INT" in declared:
        return "int"
    if any(word in declared for word in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL")):
        return "real"
    return "text"


def _tables(connection: sqlite3.Connection) -> list[str]:
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY rowid"
    )
    return [row[0] for row in rows]


def _keys(connection: sqlite3.Connection, table: str) -> set[str]:
    """Columns of ``table`` that are a key: primary, foreign or in a unique index."""
    keys = {row[1] for row in connection.execute(f'PRAGMA table_info("{table}")') if row[5]}
    keys |= {row[3] for row in connection.execute(f'PRAGMA foreign_key_list("{table}")')}
    for index in connection.execute(f'PRAGMA index_list("{table}")').fetchall():
        if index[2]:  # unique
            keys |= {row[2] for row in connection.execute(f'PRAGMA index_info("{index[1]}")')}
    return keys


def _editable_columns(
    connection: sqlite3.Connection, table: str, facts: GoldFacts, keep: frozenset[str]
) -> list[_Column]:
    """The columns of ``table`` a fuzzed copy may edit: read by the gold, not a key, not
    kept (:data:`KEEP`); with their values in rowid order."""
    if f"{table}.*" in keep:
        return []
    keys = _keys(connection, table)
    columns = []
    for _, name, declared, notnull, _, _ in connection.execute(f'PRAGMA table_info("{table}")'):
        if facts.reads(table, name) and name not in keys and f"{table}.{name}" not in keep:
            columns.append(_Column(table, name, _kind(declared or ""), not notnull))
    return columns


def _load(connection: sqlite3.Connection, column: _Column) -> _Column:
    """``column`` with its values as they are now."""
    rows = connection.execute(f'SELECT rowid, "{column.name}" FROM "{column.table}"')
    column.values = dict(rows.fetchall())
    return column


def rows_in_scope(connection: sqlite3.Connection, facts: GoldFacts) -> dict[str, dict[int, int]]:
    """Per table, how near each row is to the gold (rowid -> score, rows of score 0 left
    out): one point per literal it holds (a number in a number column, a text in a text
    column, a date in a date column by prefix), plus the score of each row its foreign
    keys point at (one table to the next, twice over; a table's key to itself is not
    followed). The loans of the member and the year a question names score highest."""
    tables = _tables(connection)
    direct = {table: _holding_literals(connection, table, facts) for table in tables}
    scores = {table: dict(rows) for table, rows in direct.items()}
    for _ in range(2):
        for child in (table for table in tables if table.lower() in facts.tables):
            total = dict(direct[child])
            for key in connection.execute(f'PRAGMA foreign_key_list("{child}")').fetchall():
                parent, column, target = key[2], key[3], key[4] or "rowid"
                if parent == child or not scores.get(parent):
                    continue
                near = {
                    value: scores[parent][rowid]
                    for rowid, value in connection.execute(
                        f'SELECT rowid, "{target}" FROM "{parent}"'
                    )
                    if rowid in scores[parent]
                }
                for rowid, value in connection.execute(f'SELECT rowid, "{column}" FROM "{child}"'):
                    if value in near:
                        total[rowid] = total.get(rowid, 0) + near[value]
            scores[child] = total
    return scores


def _nearest(
    scores: dict[int, int], every: list[int], rng: np.random.Generator
) -> tuple[list[int], list[int]]:
    """The rows near the gold, nearest first (highest score; ties in a random order), cut
    after the first score whose rows, with those before, number :data:`MIN_NEAR`; and the
    rest, farthest first."""
    shuffled = [every[i] for i in rng.permutation(len(every))]
    ranked = sorted(shuffled, key=lambda rowid: -scores.get(rowid, 0))
    end = MIN_NEAR
    while end < len(ranked) and scores.get(ranked[end], 0) == scores.get(ranked[end - 1], 0):
        end += 1
    return ranked[:end], ranked[end:][::-1]


def _holding_literals(
    connection: sqlite3.Connection, table: str, facts: GoldFacts
) -> dict[int, int]:
    """Rowid -> how many of the gold's literals the row holds in the columns they are
    compared with (rows holding none left out); a date column holds a year, month or day
    it starts with."""
    tests, args = [], []
    for _, name, declared, *_ in connection.execute(f'PRAGMA table_info("{table}")'):
        kind = _kind(declared or "")
        for value in facts.compared(table, name):
            if kind in ("date", "datetime") and isinstance(value, str) and _DATE.match(value):
                tests.append(f'(substr("{name}", 1, {len(value)}) = ?)')
            elif (kind in ("int", "real")) == isinstance(value, float):
                tests.append(f'("{name}" = ?)')
            else:
                continue
            args.append(value)
    if not tests:
        return {}
    rows = connection.execute(
        f'SELECT rowid, {" + ".join(tests)} AS score FROM "{table}" WHERE score > 0', args
    )
    return dict(rows.fetchall())


def _grid(values: Iterable[Any]) -> int:
    """The step an integer column's values keep (their differences' gcd; at least 1)."""
    present = sorted({v for v in values if isinstance(v, int)})
    step = 0
    for value in present[1:]:
        step = math.gcd(step, value - present[0])
    return step or 1


def _number_witnesses(column: _Column, facts: GoldFacts) -> list[Any]:
    """The gold's numbers in the column's range, and one step either side (on the
    column's grid; for reals, the literal's last decimal)."""
    present = [v for v in column.values.values() if isinstance(v, int | float)]
    if not present:
        return []
    low, high = min(present), max(present)
    step = _grid(column.values.values()) if column.kind == "int" else None
    witnesses = []
    for literal in facts.compared(column.table, column.name):
        if not isinstance(literal, float):
            continue
        if column.kind == "int":
            if literal != int(literal) or int(literal) % step != low % step:
                continue
            candidates = [int(literal), int(literal) + step, int(literal) - step]
        else:
            decimals = 0 if literal == int(literal) else len(repr(literal).split(".")[1])
            unit = 10.0**-decimals
            candidates = [
                float(literal),
                round(literal + unit, decimals),
                round(literal - unit, decimals),
            ]
        witnesses += [c for c in candidates if low <= c <= high and c not in witnesses]
    return witnesses


def _day(text: str) -> dt.date | None:
    with contextlib.suppress(ValueError):
        return dt.date.fromisoformat(text[:10])
    return None


def _date_witnesses(column: _Column, facts: GoldFacts) -> list[dt.date]:
    """Days where a date literal's bounds lie: the day and its neighbours; a month's or
    year's first and last days and the days just outside; within the column's range."""
    dated = [v for v in column.values.values() if isinstance(v, str)]
    low, high = (_day(min(dated)), _day(max(dated))) if dated else (None, None)
    if low is None or high is None:
        return []
    one = dt.timedelta(days=1)
    witnesses: list[dt.date] = []
    for literal in facts.compared(column.table, column.name):
        if not isinstance(literal, str) or not _DATE.match(literal):
            continue
        if len(literal) == 10:
            first = last = dt.date.fromisoformat(literal)
        elif len(literal) == 7:
            first = dt.date.fromisoformat(literal + "-01")
            last = (first.replace(day=28) + 4 * one).replace(day=1) - one
        else:
            first, last = dt.date(int(literal), 1, 1), dt.date(int(literal), 12, 31)
        for day in (first, last, first - one, last + one):
            if low <= day <= high and day not in witnesses:
                witnesses.append(day)
    return witnesses


def _count(rows: list[int], least: int) -> int:
    """How many of ``rows`` one kind of edit changes: a :data:`SHARE` of them, at least
    ``least``, at most :data:`MAX_EDITS` (and at most all)."""
    return min(len(rows), max(least, min(MAX_EDITS, math.ceil(SHARE * len(rows)))))


def _edits(
    column: _Column, near: list[int], far: list[int], facts: GoldFacts, variant: int
) -> dict[int, Any]:
    """New values of ``column`` by rowid (dates as days): witnesses on the rows ``near``
    the gold, nearest first (the ``variant``-th copy starts at the ``variant``-th
    witness), then a few NULLs; a text column's values repeated among them, and the
    gold's text literal on a few rows ``far`` from it."""
    edits: dict[int, Any] = {}
    present = [v for v in column.values.values() if v is not None]
    witnesses: list[Any] = []
    if column.kind in ("int", "real"):
        witnesses = _number_witnesses(column, facts)
    elif column.kind in ("date", "datetime"):
        witnesses = _date_witnesses(column, facts)
    elif len(set(present)) < len(present):  # text whose values repeat already
        picked = near[: _count(near, 2)]
        witnesses = []
        edits |= {b: column.values[a] for a, b in zip(picked[::2], picked[1::2], strict=False)}
        named = sorted({t for t in facts.compared(column.table, column.name) if t in set(present)})
        for index, row in enumerate(far[: min(4, len(far))] if named else ()):
            edits[row] = named[index % len(named)]
    count = _count(near, len(witnesses)) if witnesses else 0
    for index, row in enumerate(near[:count]):
        edits[row] = witnesses[(index + variant) % len(witnesses)]
    if column.nullable and len(present) < len(column.values):  # NULLs here already
        edits |= dict.fromkeys(near[max(count, 1) : max(count, 1) + 2], None)
    return edits


def _apply(
    connection: sqlite3.Connection, table: str, column: _Column, edits: dict[int, Any]
) -> None:
    """Write ``edits`` to ``column``; a date moved moves the row's other dates with it
    (by the same number of days, so their order holds)."""
    if not edits:
        return
    updates: dict[str, list[tuple[Any, int]]] = {column.name: []}
    siblings = []
    if column.kind in ("date", "datetime"):
        keys = _keys(connection, table)
        siblings = [
            row[1]
            for row in connection.execute(f'PRAGMA table_info("{table}")')
            if _kind(row[2] or "") in ("date", "datetime")
            and row[1] not in keys
            and row[1] != column.name
        ]
    for rowid, value in edits.items():
        old = column.values[rowid]
        if isinstance(value, dt.date) and isinstance(old, str) and _day(old):
            delta = value - _day(old)
            updates[column.name].append((value.isoformat() + old[10:], rowid))
            for sibling in siblings:
                updates.setdefault(sibling, []).append((delta.days, rowid))
        elif not isinstance(value, dt.date):
            cast = float(value) if column.kind == "real" and value is not None else value
            updates[column.name].append((cast, rowid))
    connection.executemany(
        f'UPDATE "{table}" SET "{column.name}" = ? WHERE rowid = ?', updates.pop(column.name)
    )
    for sibling, shifts in updates.items():  # date(x, '+n days') keeps a time part
        connection.executemany(
            f'UPDATE "{table}" SET "{sibling}" = CASE WHEN length("{sibling}") > 10 THEN '
            f"datetime(\"{sibling}\", ? || ' days') ELSE date(\"{sibling}\", ? || ' days') END "
            "WHERE rowid = ?",
            [(f"{days:+d}", f"{days:+d}", rowid) for days, rowid in shifts],
        )


def fuzz(
    connection: sqlite3.Connection,
    gold_sql: str,
    seed: int,
    domain: str | None,
    variant: int = 0,
    scope: dict[str, dict[int, int]] | None = None,
) -> int:
    """Edit the database of ``connection`` toward witnesses of ``gold_sql`` (module
    docstring): ties among rows broken by ``seed``, witnesses dealt from the
    ``variant``-th on (so two copies put different ones on the nearest rows); ``domain``
    names the invariants to keep (:data:`KEEP`, :data:`REPAIR`; None: keys and NOT NULL
    only); ``scope``: :func:`rows_in_scope`, if known. Returns the values changed."""
    facts = gold_facts(gold_sql)
    rng = np.random.default_rng(seed)
    scope = rows_in_scope(connection, facts) if scope is None else scope
    keep = KEEP.get(domain or "", frozenset())
    changed = 0
    for table in _tables(connection):
        if table.lower() not in facts.tables:
            continue
        every = [row[0] for row in connection.execute(f'SELECT rowid FROM "{table}"')]
        near, far = _nearest(scope.get(table, {}), every, rng)
        for column in _editable_columns(connection, table, facts, keep):
            edits = _edits(_load(connection, column), near, far, facts, variant)
            _apply(connection, table, column, edits)
            changed += len(edits)
    for statement in REPAIR.get(domain or "", ()):
        connection.execute(statement)
    return changed


def _domain_of(path: Path) -> str | None:
    """The generated domain a database file belongs to (None for another file)."""
    match = re.match(r"([a-z]+)-seed\d+-v\d+$", path.stem)
    return match.group(1) if match and match.group(1) in KEEP else None


def fuzzed_path(
    db_path: str | Path,
    gold_sql: str,
    index: int = 0,
    *,
    hold: Callable[[Path], object] | None = None,
) -> Path:
    """The ``index``-th fuzzed copy of ``db_path`` for ``gold_sql`` (module docstring),
    under ``fuzzed/`` beside it; built on first use, then reused. ``hold``: as for
    :func:`~palaestra.envs.sql.databases.database_path` (called once the copy is there,
    before the folder evicts anything)."""
    source = Path(db_path)
    digest = hashlib.sha256(f"{FUZZ_VERSION}\0{source.name}\0{gold_sql}".encode()).hexdigest()
    folder = source.parent / "fuzzed"
    path = folder / f"{source.stem}-{digest[:20]}-{index}.sqlite"
    _remember(path, source, gold_sql, index)
    return cached_file(
        path,
        lambda: _build_fuzzed(source, path, gold_sql, digest, index),
        hold,
        "*.sqlite",
        MAX_FUZZED_DATABASES,
    )


def _build_fuzzed(source: Path, path: Path, gold_sql: str, digest: str, index: int) -> None:
    """Write the fuzzed copy ``path`` of ``source``, held meanwhile (built again if it
    went: a generated database is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    held = FileHold(source)
    try:
        seed = int(digest[20:36], 16) + index
        scope = _scope(str(source.resolve()), source.stat().st_mtime_ns, gold_sql)
        domain = _domain_of(source)
        _write_fuzzed(source, path, lambda db: fuzz(db, gold_sql, seed, domain, index, scope))
    finally:
        held.close()


def fuzzed_paths(
    db_path: str | Path,
    gold_sql: str,
    count: int,
    *,
    hold: Callable[[Path], object] | None = None,
) -> list[Path]:
    """``count`` fuzzed copies of ``db_path`` for ``gold_sql`` (:func:`fuzzed_path`)."""
    if not 0 <= count <= 16:
        raise ValueError(f"0 to 16 fuzzed databases per question, got {count}")
    return [fuzzed_path(db_path, gold_sql, index, hold=hold) for index in range(count)]


_recipes: OrderedDict[Path, tuple[Path, str, int]] = OrderedDict()
_recipes_lock = threading.Lock()


def _remember(path: Path, source: Path, gold_sql: str, index: int) -> None:
    with _recipes_lock:
        _recipes[path.resolve()] = (source, gold_sql, index)
        _recipes.move_to_end(path.resolve())
        while len(_recipes) > RECIPES:
            _recipes.popitem(last=False)


def _rebuild(path: Path, hold: Callable[[Path], object]) -> bool:
    """Build a fuzzed copy this process made again (for
    :func:`~palaestra.verifiers.sql.rebuild`)."""
    with _recipes_lock:
        recipe = _recipes.get(path.resolve())
    if recipe is None:
        return False
    fuzzed_path(*recipe, hold=hold)
    return True


add_rebuilder(_rebuild)


@functools.lru_cache(maxsize=8)
def _scope(source: str, version: int, gold_sql: str) -> dict[str, dict[int, int]]:
    """:func:`rows_in_scope` of a gold on a file (once for all of its copies)."""
    connection = sqlite3.connect(f"{Path(source).as_uri()}?mode=ro", uri=True)
    try:
        return rows_in_scope(connection, gold_facts(gold_sql))
    finally:
        connection.close()


def _write_fuzzed(source: Path, path: Path, edit: Callable[[sqlite3.Connection], object]) -> None:
    """Copy ``source`` to a temporary file beside ``path``, ``edit`` it, make it read-only
    and rename it to ``path``."""

    def copy_and_edit(temporary: str) -> None:
        shutil.copyfile(source, temporary)
        connection = sqlite3.connect(temporary)
        try:
            connection.execute("PRAGMA journal_mode = OFF")  # a scratch copy: no journal
            connection.execute("PRAGMA synchronous = OFF")
            with connection:
                edit(connection)
        finally:
            connection.close()

    write_read_only(path, ".fuzzed-", copy_and_edit)


def grading_suite(
    domain: str,
    db_path: str | Path,
    gold_sql: str,
    *,
    seeds: int,
    fuzzed: int,
    hold: Callable[[Path], object] | None = None,
) -> list[Path]:
    """The databases an answer to ``gold_sql`` on ``db_path`` must also be right on:
    ``seeds`` databases of ``domain`` from seeds no episode draws
    (:func:`~palaestra.envs.sql.databases.suite_paths`), then ``fuzzed`` copies of
    ``db_path`` made to tell the gold from its near misses (:func:`fuzzed_paths`). A gold
    with LIMIT gets none (``execution_match`` judges it on ``db_path`` alone). ``hold``:
    called with each once it is there (:func:`~palaestra.envs.sql.databases.database_path`)."""
    if has_limit(gold_sql):
        return []
    return [
        *suite_paths(domain, seeds, hold=hold),
        *fuzzed_paths(db_path, gold_sql, fuzzed, hold=hold),
    ]
