"""Plain data <-> JSON, for values that cross the sandbox boundary during code grading.

Exact builtin types are encoded (``None``, ``bool``, ``int``, ``float``, ``complex``,
``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``), and the standard
library's value types a correct program returns where a builtin was asked for:
``Counter``, ``OrderedDict`` and ``defaultdict`` (as their items), namedtuples,
``Fraction``, ``Decimal``, and numpy scalars (as the Python scalar ``item()`` gives). Each
decodes to a type whose ``==`` is the original's (a ``defaultdict`` to a ``dict``, a
namedtuple to a namedtuple of the same name and fields), so comparisons behave as the
reference graders' ``==`` does. Anything else (user classes, subclasses that could redefine
equality, numpy arrays, whose ``==`` is elementwise) raises :class:`Unencodable`. Decoding
builds only those types, so a value that came out of the sandbox can never carry code. Ints
too long for ``json`` (over 4300 digits) travel as hex. This module imports only the
standard library: its source is also embedded into the programs that run inside the
sandbox (``palaestra/verifiers/_programs.py``).
"""

import json
import sys
from collections import Counter, OrderedDict, defaultdict, namedtuple
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

MAX_DEPTH = 64

HEX_INT_BITS = 12_000
"""Ints at least this long travel as hex (json cannot write ints over 4300 digits)."""


class Unencodable(ValueError):
    """The value is not plain data (or is nested too deeply)."""


def encode(value, depth=0):
    """A JSON-able tree for ``value``: scalars as themselves, containers as tagged objects."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(value)
    if kind is int and value.bit_length() >= HEX_INT_BITS:
        return {"x": format(value, "x")}
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
    return _encode_library_value(value, depth)


def _encode_library_value(value, depth):
    """The standard library's and numpy's value types (see the module docstring)."""
    kind = type(value)
    if kind in (Counter, OrderedDict):
        tag = "C" if kind is Counter else "O"
        return {tag: [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is defaultdict:
        return encode(dict(value), depth)
    if kind is Fraction:
        return {"q": [encode(value.numerator), encode(value.denominator)]}  # ints, maybe hex
    if kind is Decimal:
        return {"D": str(value)}
    if kind.__bases__ == (tuple,) and hasattr(kind, "_fields"):
        fields = [str(name) for name in kind._fields]
        items = [encode(item, depth + 1) for item in tuple.__iter__(value)]
        return {"n": [kind.__name__, fields, items]}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        plain = value.item()
        if type(plain) in (bool, int, float, complex, str, bytes):
            return encode(plain, depth)
    if numpy is not None and isinstance(value, numpy.ndarray):
        raise Unencodable("a numpy array is not plain data (its == is elementwise): return a list")
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
    if tag in ("t", "s", "f", "d", "c", "C", "O", "q", "n") and type(body) is not list:
        raise Unencodable(f"malformed {tag!r} value")
    if tag in ("C", "O", "q", "n", "x", "D"):
        return _decode_library_value(tag, body, depth)
    if tag == "t":
        return tuple(decode(item, depth + 1) for item in body)
    if tag == "s":
        return {decode(item, depth + 1) for item in body}
    if tag == "f":
        return frozenset(decode(item, depth + 1) for item in body)
    if tag == "d":
        return dict(_pairs(body, depth))
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "c" and len(body) == 2 and all(type(x) in (int, float) for x in body):
        return complex(body[0], body[1])
    raise Unencodable(f"unknown tag {tag!r}")


def _pairs(body, depth):
    if not all(type(pair) is list and len(pair) == 2 for pair in body):
        raise Unencodable("malformed mapping value")
    return [(decode(k, depth + 1), decode(v, depth + 1)) for k, v in body]


@lru_cache(maxsize=256)
def _namedtuple_class(name, fields):
    return namedtuple(name, fields)  # validates both: identifiers only


def _decode_library_value(tag, body, depth):
    try:
        if tag == "C":
            return Counter(dict(_pairs(body, depth)))
        if tag == "O":
            return OrderedDict(_pairs(body, depth))
        if tag == "x" and type(body) is str:
            return int(body, 16)
        if tag == "D" and type(body) is str and not Decimal(body).is_snan():
            return Decimal(body)  # a signalling NaN would raise in ==
        terms = [decode(x, depth + 1) for x in body] if tag == "q" else []
        if tag == "q" and len(terms) == 2 and all(type(x) is int for x in terms):
            return Fraction(terms[0], terms[1])
        if tag == "n" and len(body) == 3 and all(type(x) is list for x in body[1:]):
            name, fields, items = body
            if type(name) is str and all(type(f) is str for f in fields):
                values = [decode(item, depth + 1) for item in items]
                return _namedtuple_class(name, tuple(fields))(*values)
    except (ValueError, TypeError, ArithmeticError, ZeroDivisionError) as exc:
        raise Unencodable(f"malformed {tag!r} value ({exc})") from None
    raise Unencodable(f"malformed {tag!r} value")


def dumps(value):
    """``encode`` then compact JSON text (the key under which a call's arguments are stored)."""
    return json.dumps(encode(value), separators=(",", ":"))
