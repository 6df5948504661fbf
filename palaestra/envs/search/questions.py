"""Questions over a synthetic world: single-hop, 2-4 hop bridge, comparison, aggregation
(an author's number of works, or their first work).

Question ``index`` of a world is drawn from its own RNG (world seed and index), so any
question is reachable by index with no state. Each records its gold evidence documents (in
hop order) and its hop chain of ``(subject, relation, object)`` facts.

>>> question = make_question(build_world(0), 7)  # doctest: +SKIP
>>> question.text, question.answers, question.evidence  # doctest: +SKIP
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from palaestra.envs.search.world import Entity, World

KINDS = ("single-hop", "bridge", "comparison", "aggregation")
KIND_WEIGHTS = (0.3, 0.45, 0.15, 0.1)
BRIDGE_HOPS = (2, 3, 4)
BRIDGE_WEIGHTS = (0.45, 0.33, 0.22)

LINK_PHRASES = {
    "author": "the author of {x}",
    "birthplace": "the birthplace of {x}",
    "employer": "the organisation that employed {x}",
    "founder": "the founder of {x}",
    "headquarters": "the city where {x} has its headquarters",
    "location": "the city where {x} was held",
    "organiser": "the organiser of {x}",
}
LINK_QUESTIONS = {
    "author": "Who is the author of {x}?",
    "birthplace": "In which city was {x} born?",
    "employer": "Which organisation employed {x}?",
    "founder": "Who founded {x}?",
    "headquarters": "In which city does {x} have its headquarters?",
    "location": "In which city was {x} held?",
    "organiser": "Which organisation organised {x}?",
}
FACT_QUESTIONS = {
    ("person", "born"): "In what year was {x} born?",
    ("person", "occupation"): "What was the occupation of {x}?",
    ("place", "region"): "In which region is {x}?",
    ("place", "founded"): "In what year was {x} founded?",
    ("place", "population"): "What is the population of {x}?",
    ("organisation", "founded"): "In what year was {x} founded?",
    ("work", "year"): "In what year was {x} completed?",
    ("work", "form"): "What kind of work is {x}?",
    ("event", "year"): "In what year was {x} held?",
}
COMPARISONS = {  # kind -> (fact, question, whether the larger value wins)
    "person": ("born", "Who was born earlier, {a} or {b}?", False),
    "organisation": ("founded", "Which was founded earlier, {a} or {b}?", False),
    "place": ("population", "Which city has the larger population, {a} or {b}?", True),
    "work": ("year", "Which was completed earlier, {a} or {b}?", False),
}
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
FIRST_WORK_SHARE = 0.5
"""Aggregation questions that ask for an author's first work (the rest ask for the count)."""

Fact = tuple[str, str, str]


@dataclass(frozen=True)
class Question:
    """A question, its accepted ``answers``, the ids of its gold ``evidence`` documents (in
    hop order) and its ``chain`` of facts."""

    id: str
    kind: str
    hops: int
    text: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...]
    chain: tuple[Fact, ...]


def mention(entity: Entity) -> str:
    """How a question names ``entity`` (organisations and events take "the")."""
    return f"the {entity.name}" if entity.kind in ("organisation", "event") else entity.name


def fact_answers(entity: Entity, key: str) -> tuple[str, ...]:
    """Accepted spellings of ``entity``'s fact or link ``key``."""
    if key in entity.links:
        return (entity.links[key],)
    value = entity.facts[key]
    if key == "population":
        return (str(value), f"{int(value):,}")
    if key == "region":
        return (str(value), str(value).removeprefix("the ").removesuffix(" region"))
    return (str(value),)


def _bridge(world: World, rng: random.Random, hops: int) -> tuple[str, tuple, tuple, tuple]:
    """A walk of ``hops - 1`` links, then a fact of the last entity."""
    starts = (
        [e for e in world.entities.values() if e.links]
        if hops > 1
        else list(world.entities.values())
    )
    while True:
        entity = rng.choice(starts)
        phrase, visited, evidence, chain = mention(entity), {entity.name}, [], []
        for _ in range(hops - 1):
            links = [k for k, target in entity.links.items() if target not in visited]
            if not links:
                break
            key = rng.choice(links)
            target = world.entities[entity.links[key]]
            evidence.append(entity.fact_doc[key])
            chain.append((entity.name, key, target.name))
            phrase = LINK_PHRASES[key].format(x=phrase)
            entity = target
            visited.add(entity.name)
        else:
            finals = [k for k in entity.facts if (entity.kind, k) in FACT_QUESTIONS]
            finals += [k for k, target in entity.links.items() if target not in visited]
            key = rng.choice(finals)
            template = LINK_QUESTIONS.get(key) or FACT_QUESTIONS[(entity.kind, key)]
            evidence.append(entity.fact_doc[key])
            answers = fact_answers(entity, key)
            chain.append((entity.name, key, answers[0]))
            return template.format(x=phrase), answers, tuple(evidence), tuple(chain)


def _comparison(world: World, rng: random.Random) -> tuple[str, tuple, tuple, tuple]:
    kind = rng.choice(sorted(COMPARISONS))
    key, template, larger_wins = COMPARISONS[kind]
    pool = world.of_kind(kind)
    while True:
        a, b = rng.sample(pool, 2)
        if a.facts[key] != b.facts[key]:
            break
    winner = max((a, b), key=lambda e: int(e.facts[key]) * (1 if larger_wins else -1))
    chain = tuple((e.name, key, str(e.facts[key])) for e in (a, b))
    text = template.format(a=mention(a), b=mention(b))
    return text, (winner.name,), (a.fact_doc[key], b.fact_doc[key]), chain


def _aggregation(world: World, rng: random.Random) -> tuple[str, tuple, tuple, tuple]:
    """About all of an author's works: how many there are (stated in the author's career
    document), or which was completed first (that document names them; each work's own
    document gives its year)."""
    prolific = sorted(name for name, works in world.works_by.items() if len(works) > 1)
    author = world.entities[rng.choice(prolific or sorted(world.works_by))]
    works = [world.entities[name] for name in world.works_by[author.name]]
    count = len(works)
    listing = (author.fact_doc["works"],)
    credits = ((author.name, "works", str(count)),)
    years = [int(w.facts["year"]) for w in works]
    if rng.random() < FIRST_WORK_SHARE and count > 1 and len(set(years)) == count:
        first = min(works, key=lambda w: int(w.facts["year"]))
        evidence = listing + tuple(w.fact_doc["year"] for w in works)
        chain = credits + tuple((w.name, "year", str(w.facts["year"])) for w in works)
        return f"Which work by {author.name} was completed first?", (first.name,), evidence, chain
    answers = (str(count), NUMBER_WORDS[count]) if count < len(NUMBER_WORDS) else (str(count),)
    return f"How many works did {author.name} create?", answers, listing, credits


def make_question(world: World, index: int, kind: str | None = None) -> Question:
    """Question ``index`` of ``world`` (of ``kind`` if given, else a kind drawn by weight)."""
    rng = random.Random(f"palaestra-search-question-{world.seed}-{index}")
    drawn = rng.choices(KINDS, KIND_WEIGHTS)[0]
    kind = kind or drawn
    if kind == "single-hop":
        hops = 1
        text, answers, evidence, chain = _bridge(world, rng, 1)
    elif kind == "bridge":
        hops = rng.choices(BRIDGE_HOPS, BRIDGE_WEIGHTS)[0]
        text, answers, evidence, chain = _bridge(world, rng, hops)
    elif kind == "comparison":
        hops = 2
        text, answers, evidence, chain = _comparison(world, rng)
    elif kind == "aggregation":
        text, answers, evidence, chain = _aggregation(world, rng)
        hops = len(evidence)
    else:
        raise ValueError(f"unknown question kind {kind!r}; choose one of {KINDS}")
    return Question(f"synthetic-{world.seed}-{index}", kind, hops, text, answers, evidence, chain)
