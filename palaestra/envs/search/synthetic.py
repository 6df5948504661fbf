"""Questions over the synthetic world, as a task source and an env."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from palaestra.envs.search.env import SearchQA
from palaestra.envs.search.questions import KINDS, Question, make_question
from palaestra.envs.search.world import World, build_world
from palaestra.tasks import Problem

PROMPT = "Question: {question}"


class SyntheticQuestions(Sequence[Problem]):
    """``count`` questions over ``world`` (of ``kinds`` only, if given), by index."""

    def __init__(self, world: World, count: int, kinds: Sequence[str] | None = None):
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        unknown = set(kinds or ()) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown question kinds {sorted(unknown)}; choose from {KINDS}")
        self.world = world
        self.count = count
        self.kinds = tuple(kinds or ())

    def __len__(self) -> int:
        return self.count

    def question(self, index: int) -> Question:
        """The :class:`Question` behind row ``index``."""
        if not 0 <= index < self.count:
            raise IndexError(f"question {index} is out of range 0..{self.count - 1}")
        kind = self.kinds[index % len(self.kinds)] if self.kinds else None
        return make_question(self.world, index, kind)

    def __getitem__(self, index: int) -> Problem:  # type: ignore[override]
        question = self.question(index)
        titles = tuple(self.world.doc_by_id[doc].title for doc in question.evidence)
        metadata: dict[str, Any] = {
            "question": question.text,
            "kind": question.kind,
            "hops": question.hops,
            "evidence_ids": question.evidence,
            "evidence_titles": titles,
            "chain": question.chain,
        }
        return Problem(
            PROMPT.format(question=question.text),
            question.answers,
            id=question.id,
            data=question,
            metadata=metadata,
        )


class SyntheticSearchQA(SearchQA):
    """Multi-hop questions over a fictional knowledge base (several thousand documents drawn
    from ``world_seed``): single-hop, 2-4 hop bridge, comparison and aggregation questions
    whose answers cannot be known without searching; reward: exact match of ``<answer>``."""

    def __init__(
        self,
        *,
        world_seed: int = 0,
        num_questions: int = 10_000,
        kinds: Sequence[str] | None = None,
        **kwargs: Any,
    ):
        world = build_world(world_seed)
        super().__init__(SyntheticQuestions(world, num_questions, kinds), world.docs, **kwargs)
        self.world = world
