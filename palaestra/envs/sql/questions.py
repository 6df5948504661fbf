"""Questions with gold SQL over the synthetic databases, at five levels of difficulty.

1. **filter**: one table (``WHERE``, ``BETWEEN``, ``LIKE``, ``CASE``, ``IS NULL``);
2. **join**: several tables, self-joins (a referrer, a supervisor, a prerequisite, a
   return flight);
3. **aggregate**: ``GROUP BY``, ``HAVING``, conditional counts (``CASE`` inside ``SUM``);
4. **nested**: correlated or two-level subqueries, or set operations (``EXCEPT``,
   ``INTERSECT``);
5. **window**: window functions (``RANK``, ``DENSE_RANK``, ``ROW_NUMBER``, ``LAG``, running
   sums), over a CTE where the window needs one.

Each domain module (:mod:`palaestra.envs.sql.domains`) lists its intents. Parameters are
drawn with the episode's RNG from the episode's database (a later parameter from the
candidates an earlier one leaves); a question is kept only when its gold query returns
rows, and not a lone 0 or NULL, else it is drawn again. Text is quoted into the gold SQL by
:func:`sql_literal`.

Conventions every phrasing follows: the columns asked for are named (their order is free);
row order is stated when it matters, with its tie-break or "list every one that ties";
where the same value could come twice, the question says "one row per ..." or "each ...
once"; numbers are compared at full precision (nothing asks for rounding).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from palaestra.envs.sql.domains import DOMAINS
from palaestra.envs.sql.domains.base import Intent

__all__ = ["INTENTS", "LEVELS", "Intent", "Question", "generate_question", "sql_literal"]

LEVELS = {1: "filter", 2: "join", 3: "aggregate", 4: "nested", 5: "window"}
INTENTS: dict[str, dict[str, Intent]] = {name: module.INTENTS for name, module in DOMAINS.items()}
MAX_DRAWS = 30
"""Draws (intent and parameters) tried before giving up on a database."""


@dataclass(frozen=True)
class Question:
    """A generated question: text, gold SQL, level, and which intent made it."""

    text: str
    gold_sql: str
    level: int
    intent: str


def sql_literal(value: Any) -> str:
    """``value`` as an SQLite literal (text quoted with doubled single quotes)."""
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def generate_question(
    domain: str,
    connection: sqlite3.Connection,
    rng: np.random.Generator,
    *,
    levels: tuple[int, ...] = tuple(LEVELS),
    intents: Sequence[str] | None = None,
) -> Question:
    """A question of ``domain`` at one of ``levels`` (and among ``intents``, if given) whose
    answer on the database of ``connection`` has rows; parameters drawn from that database
    with ``rng``."""
    candidates = sorted(
        name
        for name, intent in INTENTS[domain].items()
        if intent.level in levels and (intents is None or name in intents)
    )
    if not candidates:
        raise ValueError(f"domain {domain!r} has no question at levels {levels} in {intents}")
    for _ in range(MAX_DRAWS):
        name = candidates[int(rng.integers(len(candidates)))]
        question = _draw(name, INTENTS[domain][name], connection, rng)
        if question is not None:
            return question
    raise RuntimeError(f"no {domain} question with an answer after {MAX_DRAWS} draws")


def _draw(
    name: str, intent: Intent, connection: sqlite3.Connection, rng: np.random.Generator
) -> Question | None:
    """The question of ``intent`` with drawn parameters, or None if its answer is empty."""
    values: dict[str, Any] = {}
    literals: dict[str, str] = {}
    for param, query in intent.params.items():
        rows = connection.execute(f"SELECT DISTINCT * FROM ({query.format(**literals)})")
        options = sorted((row[0] for row in rows if row[0] is not None), key=repr)
        if not options:
            return None
        values[param] = options[int(rng.integers(len(options)))]
        literals[param] = sql_literal(values[param])
    gold = intent.gold.format(**literals)
    if not _has_answer(connection, gold):
        return None
    text = intent.phrasings[int(rng.integers(len(intent.phrasings)))].format(**values)
    return Question(text, gold, intent.level, name)


def _has_answer(connection: sqlite3.Connection, sql: str) -> bool:
    """Rows, and more than a lone 0 or NULL (a constant a policy could guess)."""
    rows = connection.execute(sql).fetchmany(2)
    return bool(rows) and not (len(rows) == 1 and all(v in (None, 0) for v in rows[0]))
