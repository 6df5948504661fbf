"""Twenty questions: find the thing the env has in mind by asking yes/no questions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import parse_move
from palaestra.envs.games.twenty_questions_kb import (
    ANSWER_TEXT,
    KnowledgeBase,
    load_knowledge_base,
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"scope": "category", "max_turns": 30, "list_candidates": True},
    "medium": {"scope": "all", "max_turns": 25, "list_candidates": True},
    "hard": {"scope": "all", "max_turns": 20, "list_candidates": False},
}
MAX_QUESTION_LENGTH = 120
"""The longest bare (unboxed) question read; anything longer must go inside ``\\boxed{}``."""

SYSTEM_PROMPT = (
    "You are playing twenty questions. Each turn, ask one yes/no question from the list you "
    "are given, or guess the thing. Think step by step, then put your question or guess "
    "inside \\boxed{}, for example \\boxed{Is it alive?} or \\boxed{Is it a dog?}."
)


class TwentyQuestions(TurnBasedEnv):
    """Find a secret entity of the shipped knowledge base (317 common things: animals,
    plants, foods, household items, devices, tools, clothing, vehicles, instruments, toys,
    places, natural things) by asking yes/no questions.

    Each turn is one question or one guess. A question must be one of the knowledge base's
    60 questions (in any of its phrasings, listed in the first observation); the answer is
    yes, no or "I don't know (it depends)". A guess is ``Is it a dog?`` or just ``dog``.
    Anything else gets the list of questions and costs a turn. ``easy`` names the secret's
    category and lists its members (30 turns), ``medium`` lists every entity (25 turns),
    ``hard`` lists none (20 turns).

    Reward: 1 for the correct guess, else 0. ``shaping > 0`` adds a potential-based
    per-turn reward: ``shaping`` times the information an answer gained,
    ``log(candidates before / candidates after) / log(candidates at the start)``, where the
    candidates are the entities consistent with every answer so far (a wrong guess rules
    out one); it sums to ``shaping`` over any win. The oracle asks the question that splits
    the candidates best and guesses once two or fewer are left; it wins every episode.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_turns: int | None = None,
        list_candidates: bool | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        preset = difficulty_preset(PRESETS, difficulty)
        self.kb: KnowledgeBase = load_knowledge_base()
        self.scope = preset["scope"]
        self.max_turns = preset["max_turns"] if max_turns is None else max_turns
        self.list_candidates = (
            preset["list_candidates"] if list_candidates is None else list_candidates
        )
        if self.max_turns < 1 or shaping < 0:
            raise ValueError("max_turns must be >= 1 and shaping >= 0")
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.secret = ""
        self._secret_index = 0
        self._start_count = 1
        self._candidates = np.arange(0)
        self._history: list[str] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._secret_index = int(self.np_random.integers(len(self.kb.entities)))
        secret = self.kb.entities[self._secret_index]
        self.secret = secret.name
        if self.scope == "category":
            self._candidates = self.kb.category_members(secret.category)
        else:
            self._candidates = np.arange(len(self.kb.entities))
        self._start_count = len(self._candidates)
        self._history = []
        self.start()
        return self._task(), {"role": "user"}

    def _task(self) -> str:
        what = (
            self.kb.categories[self.kb.entities[self._secret_index].category]
            if self.scope == "category"
            else "a common thing"
        )
        lines = [
            f"I am thinking of {what}. Find it in at most {self.max_turns} turns: each turn, "
            "ask one of the questions below or make a guess; both count as a turn. I answer "
            'yes, no, or "I don\'t know" where it depends. Put your question or guess inside '
            "\\boxed{}, for example \\boxed{Is it alive?} or \\boxed{Is it a dog?}.",
            "",
            "Questions I can answer:",
            *(f"- {attribute.question}" for attribute in self.kb.attributes),
        ]
        if self.list_candidates:
            names = ", ".join(self.kb.entities[i].name for i in self._candidates)
            lines += ["", f"It is one of these: {names}."]
        return "\n".join(lines)

    def play(self, action: str) -> StepResult:
        move = parse_move(action, MAX_QUESTION_LENGTH)
        before = len(self._candidates)
        if move is None:
            feedback = "I could not read a question: put one question or guess inside \\boxed{}."
        elif (attribute := self.kb.question_index(move)) is not None:
            value = self.kb.values[self._secret_index, attribute]
            kept = self.kb.values[self._candidates, attribute] == value
            self._candidates = self._candidates[kept]
            feedback = f"{self.kb.attributes[attribute].question} {ANSWER_TEXT[int(value)]}"
        elif (guess := self.kb.entity_index_of_guess(move)) is not None:
            if guess == self._secret_index:
                self._candidates = np.array([guess])
                return self.finish(
                    f"Yes! It is the {self.secret}. You found it in {self.turn} turns.",
                    1.0 + self._gain(before),
                    True,
                    candidates_left=1.0,
                )
            self._candidates = self._candidates[self._candidates != guess]
            feedback = f"No, it is not the {self.kb.entities[guess].name}."
        else:
            feedback = self._unknown(move)
        self._history.append(feedback)
        gain = self._gain(before)
        left = float(len(self._candidates))
        if self.turns_left() == 0:
            return self.finish(
                f"{feedback} No turns left; it was the {self.secret}.",
                gain,
                False,
                candidates_left=left,
            )
        plural = "turn" if self.turns_left() == 1 else "turns"
        return self.proceed(f"{feedback} {self.turns_left()} {plural} left.", gain)

    def _unknown(self, move: str) -> str:
        questions = " / ".join(attribute.question for attribute in self.kb.attributes)
        name = self.kb.guessed_name(move)[:40]
        return (
            f'"{name}" is neither one of my questions nor a thing I know. I can only answer '
            f"these questions: {questions}. Or guess, for example \\boxed{{Is it a dog?}}."
        )

    def _gain(self, before: int) -> float:
        """The shaping reward for narrowing ``before`` candidates to the current ones."""
        if not self.shaping or self._start_count < 2:
            return 0.0
        ratio = before / max(1, len(self._candidates))
        return self.shaping * math.log(ratio) / math.log(self._start_count)

    def candidates(self) -> list[str]:
        """The entities consistent with every answer so far."""
        return [self.kb.entities[i].name for i in self._candidates]

    def oracle(self) -> Policy:
        """Guess once two or fewer candidates are left, else ask the best-splitting question."""

        def policy(observation: str) -> str:
            if len(self._candidates) <= 2:
                return "\\boxed{" + self.kb.entities[self._candidates[0]].name + "}"
            attribute = self.kb.best_question(self._candidates)
            if attribute is None:  # cannot happen: any two entities differ on a known answer
                return "\\boxed{" + self.kb.entities[self._candidates[0]].name + "}"
            return "\\boxed{" + self.kb.attributes[attribute].question + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        """A random question from the list, or (one time in four) a random guess."""
        if rng.random() < 0.25:
            return (
                "\\boxed{" + self.kb.entities[int(rng.integers(len(self.kb.entities)))].name + "}"
            )
        return (
            "\\boxed{"
            + self.kb.attributes[int(rng.integers(len(self.kb.attributes)))].question
            + "}"
        )

    def render_text(self) -> str:
        return "\n".join(
            [
                f"turn {self.turn}/{self.max_turns}, {len(self._candidates)} candidates",
                *self._history,
            ]
        )
