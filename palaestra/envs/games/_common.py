"""Reading a move from a game action."""

from __future__ import annotations

from palaestra.verifiers.extract import last_boxed

MAX_BARE_MOVE_LENGTH = 32


def parse_move(action: str, max_bare_length: int = MAX_BARE_MOVE_LENGTH) -> str | None:
    r"""The move in an action: the last ``\boxed{...}``, else the whole action if it is short
    (at most ``max_bare_length`` characters).

    The bare form lets a person type ``25`` in ``palaestra play``; models are asked for
    ``\boxed{25}``. Returns None when no move can be read.
    """
    boxed = last_boxed(action)
    if boxed is not None:
        return boxed.strip()
    bare = action.strip()
    if 0 < len(bare) <= max_bare_length:
        return bare
    return None


def left(count: int, unit: str) -> str:
    """``"3 moves left."``, ``"1 move left."``: the turn budget every game shows each turn.

    >>> left(1, "guess")
    '1 guess left.'
    """
    plural = unit if count == 1 else unit + ("es" if unit.endswith(("s", "ch")) else "s")
    return f"{count} {plural} left."
