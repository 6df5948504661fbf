"""Twenty questions (entity deduction): find the secret thing by asking yes / no questions.

The judge answers from a shipped knowledge base (``data/twenty_questions.txt``: a few hundred
animals, plants, foods, objects, vehicles and places with yes / no / unknown attributes), so
every answer is reproducible and a policy cannot talk the judge into anything.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move

YES, NO, UNKNOWN = "yes", "no", "unknown"
PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"hint": True, "listed": True, "max_turns": 20},
    "medium": {"hint": False, "listed": True, "max_turns": 20},
    "hard": {"hint": False, "listed": False, "max_turns": 14},
}
SYSTEM_PROMPT = (
    "You are playing twenty questions. Think step by step, then ask one of the listed "
    "questions inside \\boxed{}, by its text or its number (e.g. \\boxed{Can it fly?} or "
    "\\boxed{8}), or guess with \\boxed{guess: penguin}."
)
MAX_BARE_QUESTION = 120
"""The longest question read without ``\\boxed{}`` (typed in ``palaestra play``)."""
_GUESS = re.compile(r"^\s*(?:guess\s*[:=]?|is it (?:a |an |the )?)\s*(.+?)\s*\??\s*$", re.I)
_WORDS = re.compile(r"[^a-z0-9]+")
_ARTICLE = re.compile(r"^(?:a|an|the|some) ")


@dataclass(frozen=True)
class KnowledgeBase:
    """Questions (attribute -> question text), entities and their answers, categories."""

    questions: dict[str, str]
    answers: dict[str, dict[str, str]]  # entity -> attribute -> yes / no / unknown
    categories: dict[str, str]  # entity -> category

    @property
    def entities(self) -> list[str]:
        return list(self.answers)


def _key(text: str) -> str:
    return _WORDS.sub(" ", text.lower()).strip()


def name_forms(name: str) -> set[str]:
    """The ways a guess may name an entity: as listed, in the plural, or without a final
    s (``pencil``, ``pencils``; ``peas``, ``pea``; ``knife``, ``knives``).

    >>> sorted(name_forms("strawberry"))
    ['strawberries', 'strawberry', 'strawberrys']
    """
    *head, last = _key(name).split(" ")
    lasts = {last, last + "s"}
    if last.endswith(("s", "x", "z", "ch", "sh")):
        lasts |= {last + "es", last[:-1]} if last.endswith("s") and len(last) > 3 else {last + "es"}
    if last.endswith("y") and last[-2:-1] not in "aeiou":
        lasts.add(last[:-1] + "ies")
    if last.endswith(("f", "fe")):
        lasts.add(last.rsplit("f", 1)[0] + "ves")
    return {" ".join([*head, form]) for form in lasts}


def _names_by_form(entities: list[str]) -> dict[str, str]:
    """Every form of every entity's name -> the entity (a form two entities share is left
    out, the exact names win)."""
    owners: dict[str, set[str]] = {}
    for entity in entities:
        for form in name_forms(entity):
            owners.setdefault(form, set()).add(entity)
    forms = {form: next(iter(names)) for form, names in owners.items() if len(names) == 1}
    return forms | {_key(entity): entity for entity in entities}


@functools.cache
def knowledge_base() -> KnowledgeBase:
    """The shipped knowledge base (parsed once per process)."""
    text = resources.files("palaestra.envs.games").joinpath("data/twenty_questions.txt")
    questions: dict[str, str] = {}
    implied: dict[str, tuple[set[str], set[str]]] = {}
    answers: dict[str, dict[str, str]] = {}
    categories: dict[str, str] = {}
    for number, raw in enumerate(text.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("?"):
            key, question = (part.strip() for part in line[1:].split("|"))
            questions[key] = question
            continue
        fields = [part.split() for part in line.lstrip("=").split("|")]
        fields += [[]] * (4 - len(fields))
        if line.startswith("="):
            implied[fields[0][0]] = (set(fields[1]), set(fields[2]))
            continue
        name, category = " ".join(fields[0]), fields[1][0]
        has = {token for token in fields[2] if not token.startswith("-")}
        lacks = {token[1:] for token in fields[2] if token.startswith("-")}
        unknown = set(fields[3])
        inherited, inherited_unknown = implied[category]
        unknown |= inherited_unknown - has - lacks
        has |= inherited - unknown - lacks
        strange = (has | lacks | unknown) - set(questions)
        if strange:
            raise ValueError(f"twenty_questions.txt:{number}: unknown attributes {sorted(strange)}")
        answers[name] = {
            key: UNKNOWN if key in unknown else YES if key in has else NO for key in questions
        }
        categories[name] = category
    return KnowledgeBase(questions, answers, categories)


CATEGORY_HINTS = {
    "mammal": "an animal", "bird": "an animal", "fish": "an animal", "reptile": "an animal",
    "bug": "an animal", "fruit": "something that grows", "vegetable": "something that grows",
    "plant": "something that grows", "food": "something to eat or drink",
    "drink": "something to eat or drink", "vehicle": "a made object",
    "tool": "a made object", "kitchen": "a made object", "furniture": "a made object",
    "electronic": "a made object", "clothing": "a made object", "instrument": "a made object",
    "sport": "a made object", "object": "a made object", "building": "a place or a thing in nature",
    "nature": "a place or a thing in nature",
}  # fmt: skip
"""The hint of the easy variant: the broad group the secret belongs to."""


def split(candidates: list[str], key: str, kb: KnowledgeBase) -> dict[str, list[str]]:
    """The candidates grouped by their answer to the question ``key``."""
    groups: dict[str, list[str]] = {YES: [], NO: [], UNKNOWN: []}
    for entity in candidates:
        groups[kb.answers[entity][key]].append(entity)
    return groups


def best_question(candidates: list[str], asked: set[str], kb: KnowledgeBase) -> str | None:
    """The question whose largest answer group is smallest (ties: the first listed); None
    when no question splits the candidates."""
    best, best_size = None, len(candidates)
    for key in kb.questions:
        if key in asked:
            continue
        size = max(len(group) for group in split(candidates, key, kb).values())
        if size < best_size:
            best, best_size = key, size
    return best


class TwentyQuestions(TurnBasedEnv):
    """Find the secret entity of the knowledge base by yes / no questions, then guess it.

    Each turn asks one listed question (by text or number; the judge answers yes, no or "I
    don't know") or makes the one guess (singular or plural, with or without an article).
    A correct guess wins (reward 1), a wrong one ends the episode (0): naming the listed
    candidates one by one without asking won 8 of 30 easy episodes when a wrong guess only
    cost a turn. An unreadable move or a question the judge does not know costs a turn.
    Easy: the secret's broad group is told with its members listed, 20 turns; medium: every
    entity listed, 20 turns; hard: none listed, 14 turns. ``shaping > 0`` adds a
    potential-based per-turn reward: ``shaping`` times the change in ``1 - log(candidates) /
    log(all)`` (the candidates are the entities consistent with the answers so far), which
    sums to ``shaping`` over any win. The oracle asks the question whose largest answer group
    is smallest, and guesses when one candidate is left.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.hint, self.listed = preset["hint"], preset["listed"]
        self.max_turns = max_turns or preset["max_turns"]
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.kb = knowledge_base()
        self.keys = list(self.kb.questions)
        self._by_text = {_key(q): k for k, q in self.kb.questions.items()}
        self._by_name = _names_by_form(self.kb.entities)
        self.secret = ""
        self.candidates: list[str] = []
        self._listed: list[str] = []
        self.asked: set[str] = set()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        entities = self.kb.entities
        self.secret = entities[int(self.np_random.integers(len(entities)))]
        group = CATEGORY_HINTS[self.kb.categories[self.secret]]
        self.candidates = [
            e for e in entities if not self.hint or CATEGORY_HINTS[self.kb.categories[e]] == group
        ]
        self._listed = list(self.candidates)
        self.asked = set()
        self.start()
        menu = "\n".join(f"{i}. {self.kb.questions[k]}" for i, k in enumerate(self.keys, 1))
        hint = f" It is {group}." if self.hint else ""
        listed = f"\nIt is one of: {', '.join(self.candidates)}." if self.listed else ""
        task = (
            f"I am thinking of a thing.{hint} Find it in at most {self.max_turns} turns. Each "
            "turn, ask one of these questions inside \\boxed{} (its text or its number); I "
            "answer yes, no or I don't know. You have one guess, and a wrong one ends the "
            "game; when you know, guess: \\boxed{guess: penguin}.\n" + menu + listed
        )
        return task, {"role": "user"}

    def _read(self, action: str) -> tuple[str, str]:
        """("ask", attribute), ("guess", name) or ("invalid", why) for one move."""
        move = parse_move(action, max_bare_length=MAX_BARE_QUESTION)
        text = _key(move) if move is not None else ""
        if text.isdigit():
            if len(text) <= 3 and 1 <= int(text) <= len(self.keys):
                return "ask", self.keys[int(text) - 1]
            return (
                "invalid",
                f"There is no question {text[:8]}; the questions are 1 to {len(self.keys)}.",
            )
        if text in self._by_text:
            return "ask", self._by_text[text]
        if _ARTICLE.sub("", text) in self._by_name:
            return "guess", _ARTICLE.sub("", text)
        guess = _GUESS.match(move or "")
        named = _ARTICLE.sub("", _key(guess.group(1))) if guess else ""
        if named and (move.lower().lstrip().startswith("guess") or named in self._by_name):
            return "guess", named
        return "invalid", (
            "I can only answer the listed questions (give the text or the number inside "
            "\\boxed{}), or a guess: \\boxed{guess: name}."
        )

    def _potential(self) -> float:
        total = len(self.kb.entities)
        return self.shaping * (1 - math.log(max(len(self.candidates), 1)) / math.log(total))

    def play(self, action: str) -> StepResult:
        kind, value = self._read(action)
        before = self._potential()
        if kind == "invalid":
            feedback = value
        elif kind == "ask":
            answer = self.kb.answers[self.secret][value]
            self.asked.add(value)
            self.candidates = split(self.candidates, value, self.kb)[answer]
            reply = {YES: "Yes.", NO: "No.", UNKNOWN: "I don't know."}[answer]
            feedback = f"{self.kb.questions[value]} {reply}"
        elif self._by_name.get(value) == self.secret:
            self.candidates = [self.secret]
            return self.finish(f"Yes! It is {self.secret}.", 1.0 + self._potential() - before, True)
        else:
            return self.finish(f"No, it is not {value}: it was {self.secret}.", 0.0, False)
        gain = self._potential() - before
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No turns left; it was {self.secret}.", gain, False)
        left = self.turns_left()
        return self.proceed(f"{feedback} {left} turn{'s' if left != 1 else ''} left.", gain)

    def oracle(self) -> Policy:
        """Ask the question that best splits the candidates; guess when one is left."""

        def policy(observation: str) -> str:
            key = best_question(self.candidates, self.asked, self.kb)
            if len(self.candidates) <= 1 or key is None:
                return f"\\boxed{{guess: {self.candidates[0] if self.candidates else self.secret}}}"
            return "\\boxed{" + self.kb.questions[key] + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        """A random listed question, and on the last turn a guess of a random entity (of
        those listed at the start, or of all on hard), never looking at the answers."""
        if self.turns_left() > 1:
            return "\\boxed{" + str(int(rng.integers(1, len(self.keys) + 1))) + "}"
        names = self._listed if self.listed else self.kb.entities
        return "\\boxed{guess: " + names[int(rng.integers(len(names)))] + "}"

    def render_text(self) -> str:
        return (
            f"turn {self.turn}/{self.max_turns}; {len(self.candidates)} candidates; "
            f"secret: {self.secret}"
        )
