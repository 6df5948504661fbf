"""The knowledge base of twenty questions: entities, yes/no questions, and the answers.

``data/twenty_questions.json`` lists each attribute (a name, the question that asks it and
other phrasings of that question) and each entity (a name, aliases, a category, and the
attributes whose answer is *yes* or *unknown*; every other answer is *no*). Any two
entities differ on at least one attribute where both answers are known, so asking the
right questions always singles one out.

A question is matched after normalising (lower case, punctuation dropped), so ``"can it
fly"`` and ``"Can it fly?"`` are the same question; an attribute's own name
(``can_fly``) is accepted too.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

NO, YES, UNKNOWN = 0, 1, 2
"""The values of :attr:`KnowledgeBase.values`."""

ANSWER_TEXT = {YES: "Yes.", NO: "No.", UNKNOWN: "I don't know (it depends)."}

GUESS_PREFIXES = ("is it ", "it is ", "it s ", "my guess is ", "i guess ", "guess ", "is this ")
ARTICLES = ("a ", "an ", "the ", "some ")

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize(text: str) -> str:
    """Lower case, every run of other characters than letters and digits as one space."""
    return _NOT_ALNUM.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class Attribute:
    """A yes/no property: its ``name``, the ``question`` that asks it, other phrasings."""

    name: str
    question: str
    phrasings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entity:
    """A thing the game can be about."""

    name: str
    category: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class KnowledgeBase:
    """Entities, attributes and ``values[entity, attribute]`` in ``NO``/``YES``/``UNKNOWN``.

    ``categories`` maps a category key to how the game names it (``"an animal"``).
    """

    attributes: tuple[Attribute, ...]
    entities: tuple[Entity, ...]
    categories: dict[str, str]
    values: np.ndarray

    @functools.cached_property
    def _questions(self) -> dict[str, int]:
        return {
            normalize(text): index
            for index, attribute in enumerate(self.attributes)
            for text in (attribute.question, attribute.name, *attribute.phrasings)
        }

    @functools.cached_property
    def _names(self) -> dict[str, int]:
        return {
            normalize(text): index
            for index, entity in enumerate(self.entities)
            for text in (entity.name, *entity.aliases)
        }

    def question_index(self, text: str) -> int | None:
        """The attribute a question asks about, or None."""
        return self._questions.get(normalize(text))

    def entity_index(self, text: str) -> int | None:
        """The entity a name or alias means, or None."""
        return self._names.get(normalize(text))

    def guessed_name(self, text: str) -> str:
        """What a guess names, normalised: ``"Is it a dog?"`` -> ``"dog"``."""
        key = normalize(text)
        for prefix in GUESS_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix) :]
                break
        for article in ARTICLES:
            if key.startswith(article) and self._names.get(key) is None:
                return key[len(article) :]
        return key

    def entity_index_of_guess(self, text: str) -> int | None:
        """The entity a guess (``"Is it a dog?"``, ``"dog"``) names, or None."""
        return self.entity_index(self.guessed_name(text))

    def category_members(self, category: str) -> np.ndarray:
        """Indices of the entities of ``category``."""
        return np.array([i for i, e in enumerate(self.entities) if e.category == category])

    def best_question(self, candidates: np.ndarray) -> int | None:
        """The attribute whose answer splits ``candidates`` best (fewest expected candidates
        left; ties go to the first), or None when no attribute splits them."""
        rows = self.values[candidates]
        counts = np.stack([(rows == value).sum(axis=0) for value in (NO, YES, UNKNOWN)])
        expected = (counts.astype(np.int64) ** 2).sum(axis=0)
        expected[counts.max(axis=0) == len(candidates)] = np.iinfo(np.int64).max
        best = int(np.argmin(expected))
        return None if counts[:, best].max() == len(candidates) else best


def _check_unique(kind: str, texts: Iterable[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for key, owner in texts:
        if key in seen and seen[key] != owner:
            raise ValueError(f"{kind} {key!r} belongs to both {seen[key]!r} and {owner!r}")
        seen[key] = owner


def parse_knowledge_base(data: dict[str, Any]) -> KnowledgeBase:
    """Build a :class:`KnowledgeBase` from the JSON layout of ``data/twenty_questions.json``,
    checking that names, questions and categories are consistent."""
    attributes = tuple(
        Attribute(a["name"], a["question"], tuple(a.get("phrasings", ())))
        for a in data["attributes"]
    )
    column = {a.name: i for i, a in enumerate(attributes)}
    categories = dict(data["categories"])
    entities, values = [], np.zeros((len(data["entities"]), len(attributes)), dtype=np.int8)
    for row, item in enumerate(data["entities"]):
        entity = Entity(item["name"], item["category"], tuple(item.get("aliases", ())))
        if entity.category not in categories:
            raise ValueError(f"entity {entity.name!r} has an unknown category {entity.category!r}")
        for value, names in ((YES, item.get("yes", ())), (UNKNOWN, item.get("unknown", ()))):
            for name in names:
                if name not in column:
                    raise ValueError(f"entity {entity.name!r} names an unknown attribute {name!r}")
                values[row, column[name]] = value
        entities.append(entity)
    _check_unique(
        "question",
        ((normalize(t), a.name) for a in attributes for t in (a.question, a.name, *a.phrasings)),
    )
    _check_unique(
        "entity name", ((normalize(t), e.name) for e in entities for t in (e.name, *e.aliases))
    )
    return KnowledgeBase(attributes, tuple(entities), categories, values)


@functools.cache
def load_knowledge_base() -> KnowledgeBase:
    """The knowledge base that ships with palaestra (loaded once)."""
    text = resources.files("palaestra.envs.games").joinpath("data", "twenty_questions.json")
    return parse_knowledge_base(json.loads(text.read_text("utf-8")))
