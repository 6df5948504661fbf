"""Requests as the env server reads them: checked field by field before anything runs.

A malformed request (wrong types, an unknown op, an action past the size limit, a repeated
id) gets an error answer under its id and costs nothing else: the connection and the other
sessions on it go on. The protocol itself is described in :mod:`palaestra.runner.network`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from palaestra.runner.network import SERVER_POLICIES, TOO_LARGE, size_error

OPS = ("create", "reset", "step", "close")

MAX_INDEX = (1 << 63) - 1
"""Largest request id, session number or seed accepted (a signed 64-bit integer)."""

BAD_REQUEST = "bad_request"
"""Error code of a request refused for its form (types, fields, op)."""

REPEATED_ID = "repeated_id"
"""Error code of a request whose id is not above the connection's last one (it did not run)."""


class RequestError(Exception):
    """A request the server refuses; its message (and ``code``, if any) go to the client."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class Request:
    """One checked request. ``action`` or ``play`` (a policy of
    :data:`~palaestra.runner.network.SERVER_POLICIES`) for a step."""

    id: int
    op: str
    session: int
    env: str = ""
    kwargs: dict[str, Any] | None = None
    seed: int | None = None
    options: dict[str, Any] | None = None
    action: str | None = None
    play: str | None = None
    rng_seed: int | list[int] | None = None


def is_index(value: Any) -> bool:
    """Whether ``value`` is an integer in [0, 2**63) (JSON booleans are not)."""
    return type(value) is int and 0 <= value <= MAX_INDEX


def parse_request(raw: dict[str, Any], request_id: int, max_action_bytes: int) -> Request:
    """The checked request of ``raw`` (whose id was checked already)."""
    op = raw.get("op")
    if op not in OPS:
        raise RequestError(f"unknown op {op!r}; expected one of {', '.join(OPS)}", BAD_REQUEST)
    session = raw.get("session")
    if not is_index(session):
        raise RequestError(
            f"a request's session is an integer >= 0, got {_shown(session)}", BAD_REQUEST
        )
    request = Request(request_id, op, session)
    if op == "create":
        request.env = _typed(raw, "env", str)
        request.kwargs = _typed(raw, "kwargs", dict, optional=True) or {}
    elif op == "reset":
        request.seed = _seed(raw.get("seed"))
        request.options = _typed(raw, "options", dict, optional=True)
    elif op == "step":
        _read_step(raw, request, max_action_bytes)
    return request


def _read_step(raw: dict[str, Any], request: Request, max_action_bytes: int) -> None:
    play = raw.get("play")
    if play is None:
        request.action = _typed(raw, "action", str)
        check_size("action", request.action, max_action_bytes)
        return
    if play not in SERVER_POLICIES:
        raise RequestError(
            f"the server plays {', '.join(SERVER_POLICIES)}, not {_shown(play)}", BAD_REQUEST
        )
    request.play = play
    rng_seed = raw.get("rng_seed")
    if not (
        rng_seed is None
        or is_index(rng_seed)
        or (isinstance(rng_seed, list) and len(rng_seed) <= 8 and all(map(is_index, rng_seed)))
    ):
        raise RequestError(
            f"rng_seed is null, an integer >= 0 or a list of them, got {_shown(rng_seed)}",
            BAD_REQUEST,
        )
    request.rng_seed = rng_seed


def _seed(value: Any) -> int | None:
    if value is None or is_index(value):
        return value
    raise RequestError(f"a seed is null or an integer >= 0, got {_shown(value)}", BAD_REQUEST)


def _typed(raw: dict[str, Any], name: str, kind: type, *, optional: bool = False) -> Any:
    value = raw.get(name)
    if (value is None and optional) or isinstance(value, kind):
        return value
    expected = {str: "a string", dict: "a JSON object"}[kind]
    raise RequestError(f"{name} must be {expected}, got {_shown(value)}", BAD_REQUEST)


def _shown(value: Any) -> str:
    """A short description of a wrong value (its type, and the value when it is short)."""
    text = repr(value)
    return f"{type(value).__name__} {text}" if len(text) <= 40 else type(value).__name__


def check_size(what: str, text: str, limit: int) -> None:
    """Refuse ``text`` past ``limit`` UTF-8 bytes."""
    error = size_error(what, text, limit)
    if error is not None:
        raise RequestError(error, TOO_LARGE)
