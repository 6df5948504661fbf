"""Plain data <-> JSON, for values that cross the sandbox boundary during code grading.

Only exact builtin types are encoded (``None``, ``bool``, ``int``, ``float``, ``complex``,
``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``); anything else,
including subclasses that could redefine equality, raises :class:`Unencodable`. Decoding
builds only those builtins, so a value that came out of the sandbox can never carry code.
This module imports only the standard library: its source is also embedded into the
programs that run inside the sandbox (``palaestra/verifiers/code.py``).
"""

import json

MAX_DEPTH = 64


class Unencodable(ValueError):
    """The value is not plain data (or is nested too deeply)."""


def encode(value, depth=0):
    """A JSON-able tree for ``value``: scalars as themselves, containers as tagged objects."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        tag = "s" if kind is set else "f"
        return {tag: sorted((encode(item, depth + 1) for item in value), key=json.dumps)}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    raise Unencodable(f"a {kind.__name__} is not plain data")


def decode(tree, depth=0):
    """The plain value of an :func:`encode` tree; ``Unencodable`` for anything malformed."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(tree)
    if tree is None or kind in (bool, int, float, str):
        return tree
    if kind is list:
        return [decode(item, depth + 1) for item in tree]
    if kind is not dict or len(tree) != 1:
        raise Unencodable(f"malformed value {str(tree)[:80]!r}")
    ((tag, body),) = tree.items()
    if tag in ("t", "s", "f", "d", "c") and type(body) is not list:
        raise Unencodable(f"malformed {tag!r} value")
    if tag == "t":
        return tuple(decode(item, depth + 1) for item in body)
    if tag == "s":
        return {decode(item, depth + 1) for item in body}
    if tag == "f":
        return frozenset(decode(item, depth + 1) for item in body)
    if tag == "d":
        if not all(type(pair) is list and len(pair) == 2 for pair in body):
            raise Unencodable("malformed dict value")
        return {decode(k, depth + 1): decode(v, depth + 1) for k, v in body}
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "c" and len(body) == 2 and all(type(x) in (int, float) for x in body):
        return complex(body[0], body[1])
    raise Unencodable(f"unknown tag {tag!r}")


def dumps(value):
    """``encode`` then compact JSON text (the key under which a call's arguments are stored)."""
    return json.dumps(encode(value), separators=(",", ":"))
