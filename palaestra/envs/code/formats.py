"""The field's code dataset formats, read as published, each into a :class:`CodeProblem`.

One reader per format, chosen by the record's fields:

* APPS and TACO (``input_output``: ``inputs``/``outputs``, ``fn_name`` for call-based
  problems, outputs given as strings or lists of lines; TACO's ``time_limit`` and
  ``memory_limit``);
* LiveCodeBench code generation (``public_test_cases``/``private_test_cases``, the private
  ones as published: JSON, or base64 of zlib of a pickled JSON string, read without running
  any pickled code; ``functional`` tests call ``metadata.func_name``, a LeetCode
  ``class Solution`` method where the starter code defines one);
* MBPP (``text``, ``test_list`` of asserts, ``test_setup_code``);
* DeepCoder / rllm (``problem`` and ``tests``, or rllm's ``question`` and ``ground_truth``:
  LiveCodeBench tests with ``testtype``, PrimeIntellect tests with ``type``, TACO's
  ``inputs``/``outputs``, or plain ``input``/``output`` pairs);
* PrimeIntellect (``verification_info.test_cases`` of ``stdin_stdout`` or
  ``function_call`` tests).

A record of none of these shapes, or with a test of an unknown type, is refused with the
reason. APPS, TACO and PrimeIntellect store a call's expected result as ``[result]``; such
problems accept either (``Judging.unwrap_expected``), as their graders do.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable
from typing import Any

from palaestra.envs.code.problems import CodeProblem, extract_code
from palaestra.verifiers.code import Judging

Record = dict[str, Any]

LEETCODE_PREAMBLE = "from typing import *\n"
"""What LeetCode's judge defines before a ``class Solution`` (its starter code uses ``List``)."""


def detect_format(record: Record) -> Callable[[Record, str], CodeProblem] | None:
    """The reader for ``record``'s format, or None for palaestra's own schema."""
    if "input_output" in record:
        return read_apps
    if "public_test_cases" in record or "private_test_cases" in record:
        return read_livecodebench
    if "test_list" in record:
        return read_mbpp
    if "verification_info" in record:
        return read_primeintellect
    if "ground_truth" in record or ("problem" in record and "tests" in record):
        return read_deepcoder
    tests = record.get("tests")
    typed = isinstance(tests, list) and tests and isinstance(tests[0], dict)
    if typed and {"testtype", "type"} & tests[0].keys():  # typed tests, palaestra's fields
        return read_deepcoder
    return None


def read_apps(record: Record, task_id: str) -> CodeProblem:
    """APPS / TACO: ``question``, ``input_output`` (JSON), ``starter_code``, ``solutions``."""
    tests = _json(record["input_output"], "input_output")
    prompt = _text(record, "question")
    return _from_io_lists(tests, task_id, prompt, record, _taco_limits(record))


def read_livecodebench(record: Record, task_id: str) -> CodeProblem:
    """LiveCodeBench: ``question_content``, ``starter_code``, public and private tests."""
    tests = _json(record.get("public_test_cases") or "[]", "public_test_cases")
    tests = tests + _lcb_private_tests(record.get("private_test_cases") or "[]")
    metadata = _json(record.get("metadata") or "{}", "metadata")
    prompt = _text(record, "question_content")
    return _from_typed_tests(tests, task_id, prompt, record, metadata.get("func_name"))


def read_mbpp(record: Record, task_id: str) -> CodeProblem:
    """MBPP: ``text`` and ``test_list`` (asserts, shown in the prompt as MBPP's own is)."""
    asserts = [str(test) for test in record["test_list"]]
    setup = record.get("test_setup_code") or ""
    called = re.search(r"assert\s+(?:not\s+)?\(?\s*(?:set\()?\s*([A-Za-z_]\w*)\s*\(", asserts[0])
    prompt = f"{_text(record, 'text')}\nYour code should pass these tests:\n\n" + "\n".join(asserts)
    return CodeProblem(
        task_id,
        prompt,
        "function",
        tests=[f"{setup}\n{test}".lstrip() for test in asserts],
        entry_point=called.group(1) if called else None,
        solution=record.get("code"),
    )


def read_deepcoder(record: Record, task_id: str) -> CodeProblem:
    """DeepCoder / rllm: ``problem`` and ``tests`` (JSON) or rllm's ``ground_truth``."""
    tests = _json(record.get("tests", record.get("ground_truth")), "tests")
    prompt = _text(record, next((f for f in _PROMPT_FIELDS if f in record), "problem"))
    if isinstance(tests, dict):
        return _from_io_lists(tests, task_id, prompt, record, Judging())
    metadata = _json(record.get("metadata") or "{}", "metadata")
    return _from_typed_tests(tests, task_id, prompt, record, metadata.get("func_name"))


_PROMPT_FIELDS = ("problem", "question", "prompt")


def read_primeintellect(record: Record, task_id: str) -> CodeProblem:
    """PrimeIntellect: ``prompt``, ``gold_standard_solution``, ``verification_info``."""
    info = _json(record["verification_info"], "verification_info")
    language = info.get("language", "python")
    if language != "python":
        raise ValueError(f"the tests are for {language}, not Python")
    record = {**record, "solutions": [record.get("gold_standard_solution") or ""]}
    prompt = _text(record, "prompt")
    return _from_typed_tests(info["test_cases"], task_id, prompt, record, None)


def _from_io_lists(
    tests: dict[str, Any], task_id: str, prompt: str, record: Record, judging: Judging
) -> CodeProblem:
    """APPS-style ``{"inputs": [...], "outputs": [...], "fn_name"?}``."""
    inputs, outputs = tests["inputs"], tests["outputs"]
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    starter, solution = record.get("starter_code") or "", _first_solution(record)
    name = tests.get("fn_name")
    if not name:
        cases = [(_lines(i), _lines(o)) for i, o in zip(inputs, outputs, strict=True)]
        return CodeProblem(
            task_id,
            prompt,
            "stdio",
            cases=cases,
            solution=solution,
            judging=judging,
            starter_code=starter,
        )
    calls = [(_arguments(i), o) for i, o in zip(inputs, outputs, strict=True)]
    judging = Judging(**{**judging.__dict__, "unwrap_expected": True})
    return _call_problem(task_id, prompt, name, calls, starter, solution, judging)


def _from_typed_tests(
    tests: list[dict[str, Any]], task_id: str, prompt: str, record: Record, name: str | None
) -> CodeProblem:
    """Tests each with a type: LiveCodeBench's ``testtype``, PrimeIntellect's ``type``."""
    if not isinstance(tests, list) or not tests:
        raise ValueError("no tests")
    kinds = {_test_kind(test) for test in tests}
    if len(kinds) != 1:
        raise ValueError(f"tests mix stdin/stdout and call-based types ({sorted(kinds)})")
    starter, solution = record.get("starter_code") or "", _first_solution(record)
    if kinds == {"stdio"}:
        cases = [(_lines(t["input"]), _lines(t["output"])) for t in tests]
        return CodeProblem(
            task_id, prompt, "stdio", cases=cases, solution=solution, starter_code=starter
        )
    if kinds == {"lcb-call"}:
        name = name or tests[0].get("metadata", {}).get("func_name")
        calls = [(_lcb_arguments(t["input"]), _json(t["output"], "output")) for t in tests]
        return _call_problem(task_id, prompt, name, calls, starter, solution, Judging())
    name = name or tests[0].get("fn_name")
    calls = [(_arguments(t["input"]), t["output"]) for t in tests]
    judging = Judging(unwrap_expected=True)
    return _call_problem(task_id, prompt, name, calls, starter, solution, judging)


def _test_kind(test: dict[str, Any]) -> str:
    """``stdio``, ``lcb-call`` (inputs as lines of JSON) or ``call`` (argument lists)."""
    kind = test.get("testtype", test.get("type", "stdin"))
    if kind in ("stdin", "stdin_stdout"):
        return "stdio"
    if kind == "functional":
        return "lcb-call"
    if kind == "function_call":
        return "call"
    raise ValueError(f"unknown test type {kind!r} (expected stdin/stdout or functional tests)")


def _call_problem(
    task_id: str,
    prompt: str,
    name: str | None,
    calls: list[tuple[list[Any], Any]],
    starter: str,
    solution: str | None,
    judging: Judging,
) -> CodeProblem:
    if not name:
        raise ValueError("call-based tests but no function name (fn_name / func_name)")
    if re.search(r"^\s*class\s+Solution\b", starter, re.MULTILINE):
        name = f"Solution.{name}"
        judging = Judging(**{**judging.__dict__, "preamble": LEETCODE_PREAMBLE})
    return CodeProblem(
        task_id,
        prompt,
        "call",
        calls=calls,
        entry_point=name,
        solution=solution,
        judging=judging,
        starter_code=starter,
    )


def _taco_limits(record: Record) -> Judging:
    """TACO's ``time_limit`` ("2 seconds") and ``memory_limit`` ("256 megabytes")."""
    seconds = re.match(r"\s*([\d.]+)\s*(?:s|sec|second)", str(record.get("time_limit") or ""))
    megabytes = re.match(r"\s*(\d+)\s*(?:mb|megabyte)", str(record.get("memory_limit") or ""), re.I)
    return Judging(
        time_limit=float(seconds.group(1)) if seconds and float(seconds.group(1)) > 0 else None,
        memory_mb=max(64, int(megabytes.group(1))) if megabytes else None,
    )


def _lcb_private_tests(value: Any) -> list[dict[str, Any]]:
    """LiveCodeBench's private tests: JSON, or base64(zlib(pickle(JSON string)))."""
    if not isinstance(value, str) or value.lstrip().startswith("["):
        return _json(value, "private_test_cases")
    try:
        packed = zlib.decompress(base64.b64decode(value))
        text = _DataOnlyUnpickler(io.BytesIO(packed)).load()
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
        raise ValueError(
            f"private_test_cases is neither JSON nor LiveCodeBench's packing: {exc}"
        ) from None
    return _json(text, "private_test_cases")


class _DataOnlyUnpickler(pickle.Unpickler):
    """Reads strings, numbers and containers; refuses every class or function a pickle names."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name} from a dataset pickle")


def _lcb_arguments(text: str) -> list[Any]:
    """LiveCodeBench's functional input: one JSON value per line, one line per argument."""
    return [_json(line, "input") for line in text.strip().split("\n")]


def _arguments(value: Any) -> list[Any]:
    """APPS / TACO / PrimeIntellect call inputs: a list of arguments (a JSON string maybe)."""
    value = _json(value, "input") if isinstance(value, str) else value
    if not isinstance(value, list):
        raise ValueError(f"a call's input must be a list of arguments, got {str(value)[:60]}")
    return value


def _lines(value: Any) -> str:
    """A stdin or stdout given as a string or as a list of lines (APPS does both)."""
    if isinstance(value, list):
        return "\n".join(str(line) for line in value) + "\n"
    if not isinstance(value, str):
        raise ValueError(f"stdin/stdout must be text or a list of lines, got {str(value)[:60]}")
    return value


def _json(value: Any, field: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{field} is not valid JSON ({exc})") from None


def _text(record: Record, field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"no {field!r} text")
    return value


def _first_solution(record: Record) -> str | None:
    solutions = _json(record.get("solutions") or "[]", "solutions")
    if isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        return extract_code(solutions[0]) or solutions[0]  # DeepCoder's may be fenced
    return None
