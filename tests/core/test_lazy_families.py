"""Families registered on first lookup (register_lazy_family), e.g. GEM's `gem:` ids."""

from __future__ import annotations

import pytest

import palaestra
from palaestra.core.registry import UnknownEnvError, deregister, register_lazy_family

LOADS: list[str] = []


def register_lazy_ids() -> None:
    LOADS.append("lazy")
    palaestra.register("lazyfam:Guess-v0", "palaestra.envs.games.guess_the_number:GuessTheNumber")


@pytest.fixture
def lazy_family():
    LOADS.clear()
    register_lazy_family("lazyfam", f"{__name__}:register_lazy_ids")
    yield
    deregister("lazyfam:Guess-v0")


def test_family_loads_on_first_lookup_only(lazy_family):
    assert "lazyfam:Guess-v0" not in palaestra.list_envs()  # an unfiltered listing skips it
    assert LOADS == []
    env = palaestra.make("lazyfam:Guess-v0")
    assert env.reset(seed=0)[0]
    palaestra.make("lazyfam:Guess-v0")
    assert LOADS == ["lazy"]


def test_a_pattern_naming_the_family_lists_it(lazy_family):
    assert palaestra.list_envs("lazyfam:*") == ["lazyfam:Guess-v0"]


def test_a_missing_package_is_reported_and_retried():
    register_lazy_family("missingfam", "palaestra_no_such_package.envs:register")
    for _ in range(2):
        with pytest.raises(UnknownEnvError, match=r"missingfam.*not installed"):
            palaestra.make("missingfam:Thing-v0")
