"""Math problems from a local JSONL or Parquet file or a Hugging Face ``datasets`` object.

Nothing is downloaded: ``path`` is a local file, ``dataset`` any object with ``len()`` and
integer indexing that yields mappings (a ``datasets.Dataset``, a list of dicts, a pandas
frame's records). Answers are graded with the math verifier; a gold answer may be LaTeX
with or without ``$``, or a full solution containing ``\\boxed{}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from palaestra.envs.math._base import MathTask, MathTaskEnv


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl``/``.json`` or ``.parquet`` file as dicts."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        if suffix == ".json":
            rows = json.loads(text)
            if not isinstance(rows, list):
                raise ValueError(f"{path.name}: a .json dataset must be a list of objects")
            return rows
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(
                        f"{path.name} line {number}: invalid JSON ({exc.msg})"
                    ) from None
        return rows
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(
                "reading Parquet needs pyarrow; install it with `pip install 'palaestra[datasets]'`"
            ) from exc
        return pq.read_table(path).to_pylist()
    raise ValueError(f"unsupported dataset file type {suffix!r}; use .jsonl, .json or .parquet")


class MathDataset(MathTaskEnv):
    """Problems from local data; ``question_field``/``answer_field`` name the columns.

    ``prompt_template`` formats the question (``{question}`` placeholder). Reset seeds draw
    a row at random; ``reset(options={"index": i})`` picks row ``i``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dataset: Sequence[Mapping[str, Any]] | None = None,
        question_field: str = "question",
        answer_field: str = "answer",
        prompt_template: str = "{question}",
        max_attempts: int = 1,
        render_mode: str | None = None,
    ):
        super().__init__(max_attempts=max_attempts, render_mode=render_mode)
        if (path is None) == (dataset is None):
            raise ValueError("give exactly one of path= (a local file) or dataset= (rows)")
        if "{question}" not in prompt_template:
            raise ValueError("prompt_template must contain the placeholder {question}")
        self.path = path
        self.question_field = question_field
        self.answer_field = answer_field
        self.prompt_template = prompt_template
        self._rows: Sequence[Mapping[str, Any]] | None = dataset

    @property
    def rows(self) -> Sequence[Mapping[str, Any]]:
        """The rows (a file is read on first use)."""
        if self._rows is None:
            self._rows = load_records(self.path)  # type: ignore[arg-type]
        if len(self._rows) == 0:
            raise ValueError("the dataset has no rows")
        return self._rows

    def new_task(self, options: dict[str, Any]) -> MathTask:
        rows = self.rows
        index = options.get("index")
        if index is None:
            index = int(self.np_random.integers(len(rows)))
        if not 0 <= index < len(rows):
            raise ValueError(f"index must be in [0, {len(rows)}), got {index}")
        row = rows[index]
        missing = [f for f in (self.question_field, self.answer_field) if f not in row]
        if missing:
            raise KeyError(
                f"row {index} has no field(s) {missing}; its fields are {sorted(row)}; "
                "set question_field=/answer_field="
            )
        question = self.prompt_template.format(question=row[self.question_field])
        return MathTask(question, str(row[self.answer_field]), dict(row))
