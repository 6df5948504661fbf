"""A fictional world drawn from a seed: people, places, organisations, events and works,
their facts, and the documents that state them.

Names are built from syllables, so no fact can be known from pretraining. About a third of
the names are derived from an earlier one (``Varnel Oskuth`` / ``Dorin Oskuth``,
``Tesmarin`` / ``North Tesmarin``, ``Quillon Institute`` / ``Quillon Society``): distractors
a searcher has to tell apart. Each fact lives in exactly one document (a person's birth in
the biography, their employer in a separate career document, a work's year and author in
the work's own document), so questions have to gather facts across documents. An author's
career document also states how many works they are credited with and names them, so
questions about all of an author's works can be answered with certainty.

>>> world = build_world(0)  # doctest: +SKIP
>>> len(world.docs)  # doctest: +SKIP
3150
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from palaestra.tools.search.base import Doc

ONSETS = (
    "b",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "tr",
    "th",
    "sh",
    "st",
    "qu",
    "vel",
    "mor",
    "tal",
    "or",
    "el",
    "an",
)
VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ou", "ei")
CODAS = ("", "n", "r", "s", "th", "l", "m", "x", "nd", "rk", "sk", "lt")
OCCUPATIONS = (
    "cartographer",
    "composer",
    "engineer",
    "botanist",
    "astronomer",
    "novelist",
    "architect",
    "physician",
    "glassmaker",
    "historian",
    "painter",
    "chemist",
)
ORG_KINDS = (
    "Institute",
    "Society",
    "Company",
    "Guild",
    "Observatory",
    "Bank",
    "Foundation",
    "Academy",
    "Press",
    "Conservatory",
)
EVENT_KINDS = (
    "Accord",
    "Exhibition",
    "Congress",
    "Regatta",
    "Festival",
    "Summit",
    "Fair",
    "Tournament",
)
WORK_KINDS = ("novel", "opera", "treatise", "poem cycle", "painting", "symphony", "atlas")
WORK_NOUNS = (
    "Lantern",
    "Mirror",
    "Orchard",
    "Harbour",
    "Tower",
    "Compass",
    "Garden",
    "Bell",
    "River",
    "Crown",
    "Letters",
    "Voyage",
)
PLACE_PREFIXES = ("North", "South", "Upper", "Lower", "New", "Old", "Port")
DISTRACTOR_SHARE = 0.35


@dataclass(frozen=True)
class WorldSize:
    """How many entities of each kind a world has (documents: two per person, one per other)."""

    places: int = 250
    people: int = 900
    organisations: int = 250
    works: int = 600
    events: int = 250


@dataclass
class Entity:
    """One entity: its ``kind``, ``name``, literal ``facts`` and ``links`` to other entities
    (by name), and ``fact_doc``: the id of the document that states each fact or link."""

    kind: str
    name: str
    facts: dict[str, str | int] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    fact_doc: dict[str, str] = field(default_factory=dict)


@dataclass
class World:
    """Every entity by name, the documents, and the works of each person."""

    seed: int
    entities: dict[str, Entity]
    docs: list[Doc]
    works_by: dict[str, list[str]]

    def of_kind(self, kind: str) -> list[Entity]:
        """Every entity of ``kind`` ("person", "place", "organisation", "work", "event")."""
        return [e for e in self.entities.values() if e.kind == kind]

    @functools.cached_property
    def doc_by_id(self) -> dict[str, Doc]:
        return {doc.id: doc for doc in self.docs}


class _Names:
    """Unique syllable names; a share of them derived from earlier ones (distractors)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        """A capitalized made-up word."""
        rng = self.rng
        parts = [rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables)]
        return ("".join(parts) + rng.choice(CODAS)).capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        """A name from ``make`` that was not drawn before."""
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("could not draw a unique name; the world is too large")

    def similar(
        self, earlier: list[str], fresh: Callable[[], str], derive: Callable[[str], str]
    ) -> str:
        """A fresh name, or (with probability DISTRACTOR_SHARE) one derived from an earlier one."""
        if earlier and self.rng.random() < DISTRACTOR_SHARE:
            for _ in range(20):
                name = derive(self.rng.choice(earlier))
                if name not in self.used:
                    self.used.add(name)
                    return name
        return self.unique(fresh)


def _place_names(names: _Names, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        found.append(
            names.similar(
                found,
                lambda: names.word(names.rng.choice((2, 3))),
                lambda base: f"{names.rng.choice(PLACE_PREFIXES)} {base.split()[-1]}",
            )
        )
    return found


def _person_names(names: _Names, count: int) -> list[str]:
    firsts = [names.word(2) for _ in range(max(20, count // 8))]  # shared first names
    found: list[str] = []
    for _ in range(count):
        found.append(
            names.similar(
                found,
                lambda: f"{names.rng.choice(firsts)} {names.word(2)}",
                lambda base: f"{names.rng.choice(firsts)} {base.split()[-1]}",
            )
        )
    return found


def _org_names(names: _Names, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        found.append(
            names.similar(
                found,
                lambda: f"{names.word(2)} {names.rng.choice(ORG_KINDS)}",
                lambda base: f"{base.split()[0]} {names.rng.choice(ORG_KINDS)}",
            )
        )
    return found


def _work_names(names: _Names, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        found.append(
            names.similar(
                found,
                lambda: f"The {names.rng.choice(WORK_NOUNS)} of {names.word(2)}",
                lambda base: f"The {names.rng.choice(WORK_NOUNS)} of {base.split()[-1]}",
            )
        )
    return found


def _event_names(names: _Names, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        found.append(
            names.similar(
                found,
                lambda: f"{names.word(2)} {names.rng.choice(EVENT_KINDS)}",
                lambda base: f"{base.split()[0]} {names.rng.choice(EVENT_KINDS)}",
            )
        )
    return found


def _add(entities: dict[str, Entity], entity: Entity, doc_id: str) -> Entity:
    """Register ``entity`` with every fact and link stated in ``doc_id`` (callers move some)."""
    entities[entity.name] = entity
    for key in (*entity.facts, *entity.links):
        entity.fact_doc[key] = doc_id
    return entity


def _draw_entities(seed: int, size: WorldSize) -> dict[str, Entity]:
    rng = random.Random(f"palaestra-search-world-{seed}")
    names = _Names(rng)
    entities: dict[str, Entity] = {}
    places = [
        _add(
            entities,
            Entity(
                "place",
                name,
                {
                    "region": f"the {names.unique(lambda: names.word(2))} region",
                    "founded": rng.randint(900, 1700),
                    "population": rng.randrange(2_000, 900_000, 100),
                },
            ),
            f"place-{i}",
        )
        for i, name in enumerate(_place_names(names, size.places))
    ]
    people = [
        _add(
            entities,
            Entity(
                "person",
                name,
                {
                    "born": rng.randint(1750, 1960),
                    "occupation": rng.choice(OCCUPATIONS),
                },
                {"birthplace": rng.choice(places).name},
            ),
            f"person-{i}",
        )
        for i, name in enumerate(_person_names(names, size.people))
    ]
    orgs = []
    for i, name in enumerate(_org_names(names, size.organisations)):
        founder = rng.choice(people)
        facts = {"founded": int(founder.facts["born"]) + rng.randint(25, 50)}
        links = {"founder": founder.name, "headquarters": rng.choice(places).name}
        orgs.append(_add(entities, Entity("organisation", name, facts, links), f"org-{i}"))
    for i, person in enumerate(people):  # the career document: employer and occupation
        person.links["employer"] = rng.choice(orgs).name
        person.fact_doc["employer"] = person.fact_doc["occupation"] = f"career-{i}"
    for i, name in enumerate(_work_names(names, size.works)):
        author = rng.choice(people)
        facts = {
            "year": int(author.facts["born"]) + rng.randint(20, 60),
            "form": rng.choice(WORK_KINDS),
        }
        _add(entities, Entity("work", name, facts, {"author": author.name}), f"work-{i}")
        author.facts["works"] = int(author.facts.get("works", 0)) + 1
        author.fact_doc["works"] = author.fact_doc["employer"]
    for i, name in enumerate(_event_names(names, size.events)):
        organiser = rng.choice(orgs)
        facts = {"year": int(organiser.facts["founded"]) + rng.randint(1, 80)}
        links = {"location": rng.choice(places).name, "organiser": organiser.name}
        _add(entities, Entity("event", name, facts, links), f"event-{i}")
    return entities


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _listing(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _credits(name: str, works: list[str]) -> str:
    """The career document's sentence on ``name``'s works (empty without works)."""
    if not works:
        return ""
    noun = "work" if len(works) == 1 else "works"
    return f" {name} is credited with {len(works)} {noun}: {_listing(works)}."


def _documents(entities: dict[str, Entity], works_by: dict[str, list[str]]) -> list[Doc]:
    docs: list[Doc] = []
    for e in entities.values():
        f, ln, at = e.facts, e.links, e.fact_doc
        if e.kind == "place":
            docs.append(
                Doc(
                    at["founded"],
                    e.name,
                    (
                        f"{e.name} is a city in {f['region']}. It was founded in {f['founded']} and "
                        f"has a population of {f['population']}. Travellers know {e.name} for its "
                        "markets and old bridges."
                    ),
                )
            )
        elif e.kind == "person":
            docs.append(
                Doc(
                    at["born"],
                    e.name,
                    (
                        f"{e.name} was born in {f['born']} in {ln['birthplace']}. Little is recorded "
                        f"of the early years of {e.name} beyond the family's modest means."
                    ),
                )
            )
            docs.append(
                Doc(
                    at["employer"],
                    f"{e.name} (career)",
                    (
                        f"By occupation {_article(str(f['occupation']))}, {e.name} was employed by the "
                        f"{ln['employer']}. Colleagues described {e.name} as careful and stubborn."
                        + _credits(e.name, works_by.get(e.name, []))
                    ),
                )
            )
        elif e.kind == "organisation":
            docs.append(
                Doc(
                    at["founded"],
                    f"The {e.name}",
                    (
                        f"The {e.name} was founded in {f['founded']} by {ln['founder']}. It has its "
                        f"headquarters in {ln['headquarters']}."
                    ),
                )
            )
        elif e.kind == "work":
            docs.append(
                Doc(
                    at["year"],
                    e.name,
                    (
                        f"{e.name} is {_article(str(f['form']))}, a work completed in {f['year']}. "
                        f"Its author is {ln['author']}."
                    ),
                )
            )
        else:
            docs.append(
                Doc(
                    at["year"],
                    f"The {e.name}",
                    (
                        f"The {e.name} was held in {ln['location']} in {f['year']}. It was organised "
                        f"by the {ln['organiser']}."
                    ),
                )
            )
    return docs


@functools.lru_cache(maxsize=4)
def build_world(seed: int = 0, size: WorldSize = WorldSize()) -> World:
    """The world of ``seed`` (cached: envs of one seed share it)."""
    entities = _draw_entities(seed, size)
    works_by: dict[str, list[str]] = defaultdict(list)
    for work in (e for e in entities.values() if e.kind == "work"):
        works_by[str(work.links["author"])].append(work.name)
    return World(seed, entities, _documents(entities, works_by), dict(works_by))
