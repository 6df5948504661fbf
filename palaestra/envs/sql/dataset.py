"""Spider- and BIRD-format text-to-SQL datasets from local paths.

``path`` is the questions file (JSON list or JSONL): one record per question with
``db_id``, ``question`` and the gold query as ``query`` (Spider) or ``SQL`` (BIRD);
BIRD's ``evidence`` is shown as a hint. ``db_dir`` holds one folder per database with
``<db_id>.sqlite`` in it (both datasets' layout), or only the ``schema.sql`` script Spider
also ships: such a script is built once into the cache (how the bundled sample ships).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from palaestra.envs.sql.databases import cache_dir
from palaestra.envs.sql.env import SQLEnv
from palaestra.tasks import Problem, row_for_reset
from palaestra.tasks.files import LazyProblems, Record, read_problems, require_field

SAMPLE_DIR = Path(__file__).parent / "data" / "spider_sample"
SAMPLE_QUESTIONS = SAMPLE_DIR / "dev.json"
SAMPLE_DATABASES = SAMPLE_DIR / "database"


def database_file(db_dir: Path, db_id: str) -> Path:
    """``db_dir/db_id/db_id.sqlite``, or the cached build of ``db_dir/db_id/schema.sql``."""
    if not db_id or "/" in db_id or "\\" in db_id or db_id.startswith("."):
        raise ValueError(f"invalid db_id {db_id!r}")
    folder = db_dir / db_id
    for name in (f"{db_id}.sqlite", f"{db_id}.db"):
        if (folder / name).is_file():
            return folder / name
    script = folder / "schema.sql"
    if not script.is_file():
        raise FileNotFoundError(
            f"no database for {db_id!r}: expected {folder / (db_id + '.sqlite')}"
        )
    text = script.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    built = cache_dir() / "scripts" / f"{db_id}-{digest}.sqlite"
    if not built.is_file():
        built.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=built.parent, suffix=".sqlite")
        os.close(handle)
        try:
            connection = sqlite3.connect(temporary)
            with connection:
                connection.executescript(text)
            connection.close()
            os.replace(temporary, built)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return built


class SQLDataset(SQLEnv):
    """Questions of a Spider/BIRD-format dataset (see module docstring); defaults to a tiny
    Spider-format sample shipped with palaestra. Which row a reset serves:
    :func:`palaestra.tasks.row_for_reset`."""

    def __init__(
        self,
        path: str | Path = SAMPLE_QUESTIONS,
        db_dir: str | Path | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.path = Path(path)
        self.db_dir = (
            Path(db_dir)
            if db_dir is not None
            else (
                SAMPLE_DATABASES if self.path == SAMPLE_QUESTIONS else self.path.parent / "database"
            )
        )
        self.source = LazyProblems(lambda: read_problems(self.path, self._row_to_problem))

    def _row_to_problem(self, row: Record, index: int) -> Problem:
        db_id = str(require_field(row, "db_id", "path (a Spider/BIRD file)"))
        question = require_field(row, "question", "path (a Spider/BIRD file)")
        gold = row.get("query", row.get("SQL"))
        if not isinstance(gold, str):
            raise ValueError(f"row {index}: no gold query (a 'query' or 'SQL' field)")
        db_path = database_file(self.db_dir, db_id)
        schema = self.database(db_path).schema()
        prompt = self.prompt(schema, str(question), row.get("evidence") or None)
        data = {"db_path": str(db_path), "db_id": db_id}
        return Problem(prompt, gold, id=str(row.get("question_id", index)), data=data)

    @property
    def problem_count(self) -> int:
        return len(self.source)

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        return self.source[row_for_reset(len(self.source), seed, options, self.np_random)]
