"""Degenerate strategies lose on every game: fixed cycles, repeated and invalid moves, guesses
listed in one action or one after another, literal answers; none beats random play.

The default suite plays one id of each game on 150 seeds (30 for the games whose episodes
take longest), the easy one where an exploit
was largest before it was closed (classic 2048's corner cycle won 94% of easy episodes
against random play's 54%; naming twenty questions' listed candidates won 8 of 30);
``-m slow`` plays every variant on 200.
"""

from __future__ import annotations

import re

import pytest

import palaestra
from palaestra.core.env import Env
from palaestra.testing.degenerate import (
    INVALID,
    Cheater,
    boxed,
    check_degenerate,
    cycle,
    repeat,
    sequence,
)

DIRECTIONS = ("up", "down", "left", "right")


def _directions() -> dict[str, Cheater]:
    return {
        "down-left-down-right": cycle("down", "left", "down", "right"),
        "up-left-down-right": cycle("up", "left", "down", "right"),
        "down-right": cycle("down", "right"),
        "down-down-right-right": cycle("down", "down", "right", "right"),
        "always down": repeat("down"),
        "all four at once": repeat("up down left right"),
        "boxed list": repeat(", ".join(DIRECTIONS)),
    }


def _listed_guesses(env: Env, first: str) -> Cheater:
    """Twenty questions: name the candidates the task lists, one per turn, never asking."""
    listed = re.search(r"It is one of: (.+)\.$", first, re.M)
    names = listed.group(1).split(", ") if listed else ["cat", "dog", "car", "apple"]
    turns = iter(range(1 << 30))
    return lambda observation: boxed("guess: " + names[next(turns) % len(names)])


def _literal_target(env: Env, first: str) -> Cheater:
    """Countdown: answer the target itself, or every number given."""
    target = re.search(r"[Mm]ake (\d+)|target (\d+)|reach (\d+)", first)
    number = next(g for g in target.groups() if g) if target else "100"
    return lambda observation: boxed(number)


CHEATERS: dict[str, dict[str, Cheater]] = {
    "GuessTheNumber": {
        "scan up": sequence(lambda t: boxed(str(1 + t))),
        "always 25": repeat("25"),
        "comma list": repeat("1,2,3,4,5"),
        "boxed list": repeat("1, 2, 3, 4, 5"),
        "every box": repeat(" ".join(boxed(str(n)) for n in range(1, 51)), box=False),
    },
    "Wordle": {
        "fixed words": cycle("crane", "slate", "pious", "dumpy", "wight", "fjord"),
        "always crane": repeat("crane"),
        "word list": repeat("crane slate pious"),
    },
    "TicTacToe": {
        "scan squares": sequence(lambda t: boxed(str(1 + t % 9))),
        "corners": cycle("1", "3", "7", "9", "5"),
        "always 5": repeat("5"),
        "list": repeat("1 2 3 4 5 6 7 8 9"),
    },
    "TowerOfHanoi": {
        "six pairs": cycle("A B", "A C", "B C", "B A", "C A", "C B"),
        "three pairs": cycle("A B", "A C", "B C"),
        "always A C": repeat("A C"),
        "list": repeat("A B, A C, B C"),
    },
    "Mastermind": {
        "one colour each": sequence(lambda t: boxed(str(1 + t % 6) * 4)),
        "always 1234": repeat("1234"),
        "list": repeat("1111 2222 3333"),
    },
    "FrozenLake": _directions(),
    "Sokoban": _directions(),
    "2048": _directions(),
    "Minesweeper": {
        "scan cells": sequence(lambda t: boxed(f"reveal {1 + t // 8 % 8} {1 + t % 8}")),
        "always the centre": repeat("reveal 3 3"),
        "list": repeat("reveal 1 1, reveal 1 2, reveal 2 1"),
    },
    "Sudoku": {
        "scan cells": sequence(lambda t: boxed(f"{1 + t // 9 % 9} {1 + t % 9} {1 + t % 9}")),
        "always 1 1 1": repeat("1 1 1"),
        "list": repeat("1 1 1, 1 2 2, 1 3 3"),
    },
    "Hangman": {
        "alphabet": sequence(lambda t: boxed("abcdefghijklmnopqrstuvwxyz"[t % 26])),
        "always e": repeat("e"),
        "all letters at once": repeat("etaoinshrdlu"),
        "word list": repeat("crane slate"),
    },
    "Countdown": {
        "the target itself": _literal_target,
        "list": repeat("1 + 2, 3 * 4, 5 - 1"),
        "always 100": repeat("100"),
    },
    "WordLadder": {
        "fixed words": cycle("crane", "crate", "grate", "great"),
        "always crane": repeat("crane"),
        "word list": repeat("crane crate grate"),
    },
    "TwentyQuestions": {
        "name the listed": _listed_guesses,
        "always question 1": repeat("1"),
        "ask in order": sequence(lambda t: boxed(str(1 + t % 90))),
        "list of guesses": repeat("guess: cat, dog, car, apple, chair"),
    },
}


def _stem(env_id: str) -> str:
    name = env_id.split(":", 1)[1].rsplit("-v", 1)[0]
    return re.sub(r"-(Easy|Hard|Slippery|Closest)$", "", name)


def test_every_game_has_its_cheaters():
    assert {_stem(i) for i in palaestra.list_envs("game:*")} == set(CHEATERS)


EASY_FIRST = {"2048", "FrozenLake", "Hangman", "TicTacToe", "TwentyQuestions"}
LONG_EPISODES = {"2048", "Minesweeper", "Sokoban", "Sudoku", "WordLadder"}


@pytest.mark.parametrize("game", sorted(CHEATERS))
def test_degenerate_strategies_do_not_beat_random_play(game):
    env_id = f"game:{game}-Easy-v0" if game in EASY_FIRST else f"game:{game}-v0"
    seeds = range(30 if game in LONG_EPISODES else 150)
    check_degenerate(env_id, {"invalid text": INVALID, **CHEATERS[game]}, seeds=seeds)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", palaestra.list_envs("game:*"))
def test_degenerate_strategies_lose_on_every_variant(env_id):
    cheaters = {"invalid text": INVALID, **CHEATERS[_stem(env_id)]}
    check_degenerate(env_id, cheaters, seeds=range(200))
