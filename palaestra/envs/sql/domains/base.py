"""What every domain module uses: the seeded generator of a database, and question intents.

A domain module (``shop.py``...) holds its ``SCHEMA`` (SQLite DDL), ``build(connection,
gen)`` that fills it, and ``INTENTS``: the questions it asks, each with phrasings, a gold
query and where its parameters come from.
"""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GENERATOR_VERSION = 3

FIRST_NAMES = (
    "Ana", "Ben", "Chloé", "David", "Élodie", "Farid", "Grace", "Hiroshi", "Ingrid", "José",
    "Kofi", "Léa", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Søren", "Tariq",
    "Uma", "Viktor", "Wen", "Xavier", "Yusuf", "Zoë", "Aoife", "Łukasz", "Mia", "Noah",
)  # fmt: skip
LAST_NAMES = (
    "O'Brien", "Müller", "García", "Nguyen", "Smith", "Kowalski", "Rossi", "Haddad", "Kim",
    "D'Angelo", "Novák", "Okafor", "Silva", "Jensen", "Tanaka", "Dubois", "Iyer", "Moreau",
    "Schmidt", "Fernández", "Brown", "Larsen", "Petrov", "Yilmaz", "Cohen", "MacLeod",
)  # fmt: skip
CITIES = (
    "Lisbon", "Kraków", "São Paulo", "Zürich", "Osaka", "Nairobi", "Montréal", "Dublin",
    "Reykjavík", "Austin", "Lagos", "Hanoi", "Tromsø", "Córdoba", "Perth", "Seoul",
)  # fmt: skip


class Gen:
    """The seeded random source of one database: vectorised draws the domains share.

    Sizes vary by up to a quarter either way and the popular items (cities, customers,
    books) are a different shuffle per seed, so no count or top item is the same across
    databases.
    """

    def __init__(self, seed: int, domain: str):
        if seed < 0:
            raise ValueError(f"a database seed is >= 0, got {seed}")
        self.rng = np.random.default_rng([GENERATOR_VERSION, zlib.crc32(domain.encode()), seed])

    def size(self, base: int) -> int:
        """About ``base``: between 0.75 and 1.25 times it."""
        return max(1, round(base * self.rng.uniform(0.75, 1.25)))

    def shuffled(self, items: Sequence[Any]) -> list[Any]:
        return [items[i] for i in self.rng.permutation(len(items))]

    def choice(self, items: Sequence[Any], n: int) -> list[Any]:
        return [items[i] for i in self.rng.integers(len(items), size=n)]

    def skewed(self, items: Sequence[Any], n: int, alpha: float = 1.2) -> list[Any]:
        """Zipf draws: the k-th item with probability proportional to ``k ** -alpha``, so
        the first items are picked far more often than the last."""
        weights = np.arange(1, len(items) + 1, dtype=float) ** -alpha
        indexes = self.rng.choice(len(items), size=n, p=weights / weights.sum())
        return [items[i] for i in indexes]

    def ints(self, low: int, high: int, n: int) -> list[int]:
        """Integers in ``[low, high]``."""
        return self.rng.integers(low, high + 1, size=n).tolist()

    def money(self, low: float, high: float, n: int) -> list[float]:
        return np.round(self.rng.uniform(low, high, n), 2).tolist()

    def dates(self, start: dt.date, days: int, n: int) -> list[str]:
        """ISO dates in the ``days`` days from ``start``."""
        days_of = calendar(start, days)
        return [days_of[i] for i in self.rng.integers(days, size=n)]

    def nulls(self, values: Sequence[Any], share: float) -> list[Any]:
        """``values`` with about ``share`` of them replaced by NULL."""
        missing = self.rng.random(len(values)) < share
        return [None if gone else value for value, gone in zip(values, missing, strict=True)]

    def names(self, n: int) -> list[str]:
        firsts, lasts = self.choice(FIRST_NAMES, n), self.choice(LAST_NAMES, n)
        return [f"{first} {last}" for first, last in zip(firsts, lasts, strict=True)]

    def subsets(self, items: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
        """For each size, that many distinct items."""
        if not sizes:
            return []
        widest = min(max(sizes), len(items))
        picks = self.rng.random((len(sizes), len(items))).argsort(axis=1)[:, :widest].tolist()
        return [[items[i] for i in row[:k]] for row, k in zip(picks, sizes, strict=True)]


@functools.lru_cache(maxsize=64)
def calendar(start: dt.date, days: int) -> list[str]:
    """The ISO dates of the ``days`` days from ``start`` (index = offset in days)."""
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(days)]


def insert(connection: sqlite3.Connection, table: str, columns: Sequence[Sequence[Any]]) -> None:
    """Insert the rows given column by column."""
    rows = list(zip(*columns, strict=True))
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


@dataclass(frozen=True)
class Intent:
    """One question: its level, phrasings, gold SQL, and where its parameters come from
    (``{name: SQL whose first column lists the candidate values}``, run on the episode's
    database; a later parameter's SQL may use an earlier one as ``{name}``)."""

    level: int
    phrasings: tuple[str, ...]
    gold: str
    params: dict[str, str] = field(default_factory=dict)
