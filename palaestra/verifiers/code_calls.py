"""Call the candidate's functions in the sandbox and judge call-based problems.

:func:`call_candidate` runs ``CALLER`` (``palaestra/verifiers/_programs.py``) on a list of
calls, each ``[name, args, kwargs]`` as plain data; replies come back a line each as they
are made. A time-out (or a call that ends the program) fails only the call it cut off: the
calls after it run again in a fresh run, each with the whole time limit (a call that was not
the first of its run is given a run of its own before it is judged slow). To bound what an
endless program costs, after :data:`MAX_LOST_CALLS` such calls the calls left fail unrun.
``stop_on_failure`` (an all-or-nothing reward) ends at the first call that times out or
kills the program.

:func:`grade_calls` judges problems given as argument lists and expected results (APPS,
TACO, LiveCodeBench's functional tests, PrimeIntellect's ``function_call`` tests): the
candidate's results are compared here, in the trusted process, never in the sandbox.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from palaestra.sandboxes import ExecResult, Sandbox
from palaestra.verifiers._plain import Unencodable, decode, dumps
from palaestra.verifiers._programs import CALLER
from palaestra.verifiers.code_errors import error_location, last_error
from palaestra.verifiers.code_types import Judging, Problem, TestReport

GRADER_OUTPUT_BYTES = 64_000_000
"""What the grader reads of a candidate run's stdout (not the sandbox's user-facing cap)."""

MAX_LOST_CALLS = 3
"""Calls that may time out or end the program in one grading before the rest fail unrun
(each costs a run, a time-out a whole time limit)."""


def call_candidate(
    sandbox: Sandbox,
    code: str,
    keys: Sequence[str],
    judging: Judging,
    *,
    timeout: float,
    stop_on_failure: bool = False,
) -> dict[str, dict[str, Any]]:
    """Each call in ``keys`` -> ``{"value": tree}`` or ``{"raised": [name, text]}``, under
    the problem's ``judging`` (its time limit, else ``timeout``; memory; preamble)."""
    preamble, memory_mb, timeout = (
        judging.preamble,
        judging.memory_mb,
        judging.time_limit or timeout,
    )
    files = {"solution.py": code} | ({"preamble.py": preamble} if preamble else {})
    replies: dict[str, dict[str, Any]] = {}
    pending, lost = list(dict.fromkeys(keys)), 0
    while pending:
        result = sandbox.run(
            CALLER,
            files={**files, "calls.json": json.dumps(pending)},
            timeout=timeout,
            memory_mb=memory_mb,
            max_output_bytes=GRADER_OUTPUT_BYTES,
        )
        ready, answered = _read_replies(result.stdout, pending)
        replies.update(answered)
        rest = [key for key in pending if key not in answered]
        if not rest:
            break
        why = {"raised": ["RuntimeError", _no_result(result, code)]}
        if not ready:  # the candidate's code itself failed to load: every call fails alike
            replies.update({key: why for key in rest})
            break
        if result.timed_out and rest[0] != pending[0]:
            pending = rest  # cut off after other calls used the time: it gets a run of its own
            continue
        replies[rest[0]] = why
        pending, lost = rest[1:], lost + 1
        if pending and (stop_on_failure or lost >= MAX_LOST_CALLS):
            replies.update({key: _not_run(stop_on_failure) for key in pending})
            break
    return replies


def _not_run(stop_on_failure: bool) -> dict[str, Any]:
    why = (
        "an earlier call failed and the reward is all-or-nothing"
        if stop_on_failure
        else f"{MAX_LOST_CALLS} earlier calls timed out or ended the program"
    )
    return {"raised": ["RuntimeError", f"not run: {why}"]}


def _read_replies(stdout: str, keys: Sequence[str]) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Whether the candidate's code loaded, and the replies read (the first one per call)."""
    ready, replies = False, {}
    for line in stdout.splitlines():
        if line == '"ready"':
            ready = True
            continue
        reply = _parse_reply(line, len(keys))
        if reply is not None:
            replies.setdefault(keys[reply[0]], reply[1])
    return ready or bool(replies), replies


def _parse_reply(line: str, count: int) -> tuple[int, dict[str, Any]] | None:
    """One ``[index, {"value": tree} | {"raised": [name, text]}]`` line, checked; else None."""
    try:
        index, reply = json.loads(line)
        if not (type(index) is int and 0 <= index < count and type(reply) is dict):
            return None
        if "value" in reply and len(reply) == 1:
            decode(reply["value"])  # malformed or unhashable values fail here, not in the harness
            return index, reply
        name, text = reply["raised"]
        if len(reply) == 1 and type(name) is str and type(text) is str:
            return index, {"raised": [name, text[:300]]}  # the name must be a builtin
    except (ValueError, TypeError, KeyError, RecursionError, Unencodable):
        return None
    return None


def _no_result(result: ExecResult, code: str) -> str:
    """Why a call got no reply, with the candidate's line that failed when there is one."""
    if result.truncated:
        return f"the result is over the {GRADER_OUTPUT_BYTES} bytes the grader reads"
    if result.ok:
        return "the candidate returned no result for this call"
    where = error_location(result.stderr, code, "solution.py")
    detail = " ".join(part for part in (last_error(result.stderr), where and f"({where})") if part)
    return f"the program {result.describe()} {detail}".strip()


def grade_calls(
    sandbox: Sandbox, problem: Problem, code: str, *, timeout: float, stop_early: bool = False
) -> TestReport:
    """Call ``problem.entry_point`` on each argument list; compare each result here."""
    judging, name = problem.judging, problem.entry_point or ""
    keys = [call_key(name, args) for args, _ in problem.calls]
    replies = call_candidate(
        sandbox, code, keys, judging, timeout=timeout, stop_on_failure=stop_early
    )
    tolerance = judging.tolerance if judging.compare == "float" else None
    failures = []
    for key, (_, expected) in zip(keys, problem.calls, strict=True):
        reply, shown = replies[key], calls_text([key])
        if "raised" in reply:
            failures.append(f"{shown}: raised {reply['raised'][0]}: {reply['raised'][1]}")
            continue
        value = decode(reply["value"])
        if not results_match(value, expected, tolerance=tolerance, unwrap=judging.unwrap_expected):
            failures.append(f"{shown}: wrong result (returned {_short(repr(value))})")
    return TestReport(len(keys) - len(failures), len(keys), failures)


def calls_text(keys: Sequence[str], shown: int = 3, width: int = 120) -> str:
    """The last ``shown`` calls, as ``f(1, 'a')`` (the one that failed is last)."""
    texts = []
    for key in keys[-shown:]:
        try:
            name, args, kwargs = decode(json.loads(key))
            parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            text = f"{name}({', '.join(parts)})"
        except (ValueError, TypeError, Unencodable):
            text = "a call"
        texts.append(_short(text, width))
    earlier = len(keys) - len(texts)
    return ", ".join(texts) + (f" (after {earlier} earlier calls)" if earlier else "")


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def call_key(name: str, args: Sequence[Any]) -> str:
    """The key of one call: ``name(*args)`` as plain data."""
    return dumps([name, list(args), {}])


def results_match(
    value: Any, expected: Any, *, tolerance: float | None = None, unwrap: bool = False
) -> bool:
    """``value == expected`` with tuples as lists (JSON has no tuples); numbers within
    ``tolerance`` when one is given; ``unwrap``: an APPS-style ``[result]`` also matches
    ``result``."""
    value = _as_lists(value)
    choices = [expected] + ([expected[0]] if unwrap and _single_list(expected) else [])
    return any(_equal(value, choice, tolerance) for choice in choices)


def _single_list(value: Any) -> bool:
    return type(value) is list and len(value) == 1


def _as_lists(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_as_lists(item) for item in value]
    return value


def _equal(value: Any, expected: Any, tolerance: float | None) -> bool:
    if tolerance is not None:
        if _number(value) and _number(expected):
            return math.isclose(value, expected, rel_tol=tolerance, abs_tol=tolerance)
        if type(value) is list and type(expected) is list:
            return len(value) == len(expected) and all(
                _equal(v, e, tolerance) for v, e in zip(value, expected, strict=True)
            )
    try:
        return bool(value == expected)
    except (ArithmeticError, TypeError, ValueError, RecursionError):
        return False


def _number(value: Any) -> bool:
    return type(value) in (int, float)
