"""Problems from local files and ``datasets`` objects: the one loader every family uses.

Files: ``.jsonl``, ``.json`` (a list of objects), ``.parquet``, and gzip-compressed
``.jsonl.gz`` / ``.json.gz``. Nothing is downloaded. A row that cannot be read or turned into a
problem fails with an error that names the file, the line (or row) and the problem::

    ValueError: data.jsonl line 7: no field 'answer' (fields: id, question); set answer_field=
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

Record = Mapping[str, Any]
_Item = TypeVar("_Item")
ToProblem = Callable[[Record, int], _Item]
"""Turns row ``index`` of a source into a problem; raises ``KeyError``/``ValueError``."""

SUFFIXES = (".jsonl", ".json", ".parquet", ".jsonl.gz", ".json.gz")


def iter_records(path: str | Path) -> Iterator[tuple[str, Record]]:
    """``(where, row)`` for every row of a local file; ``where`` reads ``"name line 3"``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {str(path)!r} does not exist")
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _parquet_records(path)
        return
    if not name.endswith(SUFFIXES):
        raise ValueError(
            f"unsupported dataset file {path.name!r}; use one of {', '.join(SUFFIXES)}"
        )
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    if name.endswith((".json", ".json.gz")):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name} line {exc.lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(rows, list):
            raise ValueError(f"{path.name}: a .json dataset must be a list of objects")
        for index, row in enumerate(rows):
            yield f"{path.name} item {index}", _object(row, f"{path.name} item {index}")
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: invalid JSON ({exc.msg})") from None
        yield where, _object(row, where)


def _parquet_records(path: Path) -> Iterator[tuple[str, Record]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "reading Parquet needs pyarrow; install it with `pip install 'palaestra[datasets]'`"
        ) from exc
    for index, row in enumerate(pq.read_table(path).to_pylist()):
        yield f"{path.name} row {index}", row


def _object(row: Any, where: str) -> Record:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be a JSON object, got {type(row).__name__}")
    return row


def load_records(path: str | Path) -> list[Record]:
    """Every row of a local dataset file, as dicts."""
    return [row for _, row in iter_records(path)]


def read_problems(data: str | Path | Sequence[Record], to_problem: ToProblem) -> list[_Item]:
    """Problems from a local file or from rows (a ``datasets.Dataset``, a list of dicts).

    Errors name the file and line (or the row) of the row that failed.
    """
    if isinstance(data, str | Path):
        rows: Iterator[tuple[str, Record]] = iter_records(data)
    else:
        rows = ((f"row {index}", data[index]) for index in range(len(data)))
    problems = []
    for index, (where, row) in enumerate(rows):
        try:
            problems.append(to_problem(row, index))
        except (KeyError, ValueError, TypeError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise ValueError(f"{where}: {message}") from None
    if not problems:
        raise ValueError(f"{data if isinstance(data, str | Path) else 'the dataset'} has no rows")
    return problems


def require_field(row: Record, name: str, option: str) -> Any:
    """``row[name]``, or an error that lists the row's fields and names the option to set."""
    if name not in row:
        raise ValueError(f"no field {name!r} (fields: {', '.join(sorted(row))}); set {option}=")
    return row[name]


class LazyProblems(Sequence[_Item]):
    """A task source whose problems are read on first use (making an env stays cheap);
    thread-safe, so envs built in threads share one read."""

    def __init__(self, load: Callable[[], Sequence[_Item]]):
        self._load = load
        self._problems: Sequence[_Item] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the problems have been read."""
        return self._problems is not None

    @property
    def problems(self) -> Sequence[_Item]:
        if self._problems is None:
            with self._lock:
                if self._problems is None:
                    self._problems = self._load()
        return self._problems

    def __len__(self) -> int:
        return len(self.problems)

    def __getitem__(self, index: int) -> _Item:  # type: ignore[override]
        return self.problems[index]
