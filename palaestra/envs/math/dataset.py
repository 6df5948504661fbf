"""Math problems from a local JSONL/JSON/Parquet file or a Hugging Face ``datasets`` object.

Nothing is downloaded: ``path`` is a local file, ``dataset`` any object with ``len()`` and
integer indexing that yields mappings (a ``datasets.Dataset``, a list of dicts, a pandas
frame's records). Answers are graded with the math verifier; a gold answer may be LaTeX
with or without ``$``, or a full solution containing ``\\boxed{}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from palaestra.envs.math._base import MathEnv
from palaestra.tasks import Problem, row_for_reset
from palaestra.tasks.files import LazyProblems, Record, read_problems, require_field


class MathDataset(MathEnv):
    """Problems from local data; ``question_field``/``answer_field`` (and optionally
    ``id_field``) name the columns; ``prompt_template`` formats the question (``{question}``
    placeholder). Which row a reset serves: :func:`palaestra.tasks.row_for_reset`.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dataset: Sequence[Mapping[str, Any]] | None = None,
        question_field: str = "question",
        answer_field: str = "answer",
        id_field: str | None = None,
        prompt_template: str = "{question}",
        max_attempts: int = 1,
        attempt_cost: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_attempts=max_attempts, attempt_cost=attempt_cost, render_mode=render_mode
        )
        if (path is None) == (dataset is None):
            raise ValueError("give exactly one of path= (a local file) or dataset= (rows)")
        if "{question}" not in prompt_template:
            raise ValueError("prompt_template must contain the placeholder {question}")
        self.path = path
        self.question_field = question_field
        self.answer_field = answer_field
        self.id_field = id_field
        self.prompt_template = prompt_template
        data = path if path is not None else dataset
        self.source = LazyProblems(lambda: read_problems(data, self._row_to_problem))

    def _row_to_problem(self, row: Record, index: int) -> Problem:
        question = require_field(row, self.question_field, "question_field")
        answer = require_field(row, self.answer_field, "answer_field")
        problem_id = require_field(row, self.id_field, "id_field") if self.id_field else index
        return Problem(
            self.prompt_template.format(question=question),
            str(answer),
            id=str(problem_id),
            data=dict(row),
        )

    @property
    def problem_count(self) -> int:
        return len(self.source)

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        return self.source[row_for_reset(len(self.source), seed, options, self.np_random)]
