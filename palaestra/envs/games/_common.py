"""Helpers shared by the text games."""

from __future__ import annotations

from palaestra.verifiers.extract import last_boxed

MAX_BARE_MOVE_LENGTH = 32
DIFFICULTIES = ("easy", "medium", "hard")


def parse_move(action: str) -> str | None:
    r"""The move in an action: the last ``\boxed{...}``, else the whole action if it is short.

    The bare form lets a person type ``25`` in ``palaestra play``; models are asked for
    ``\boxed{25}``. Returns None when no move can be read.
    """
    boxed = last_boxed(action)
    if boxed is not None:
        return boxed.strip()
    bare = action.strip()
    if 0 < len(bare) <= MAX_BARE_MOVE_LENGTH:
        return bare
    return None


def difficulty_preset(presets: dict[str, dict], difficulty: str) -> dict:
    """The preset for ``difficulty``, with an error that lists the valid names."""
    try:
        return presets[difficulty]
    except KeyError:
        raise ValueError(
            f"unknown difficulty {difficulty!r}; choose one of {sorted(presets)}"
        ) from None
