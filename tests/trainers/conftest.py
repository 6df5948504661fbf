"""Fixtures the trainer tests share: the letter env registered, and a tokenizer for its texts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.trainers.letter_env import register_once


@pytest.fixture(scope="module")
def letter_env() -> None:
    """Registers ``test:Lowercase-v0`` (:mod:`tests.trainers.letter_env`)."""
    register_once()


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A byte-level tokenizer trained on the letter env's texts (a test module may define its
    own)."""
    from palaestra.trainers import tiny

    return tiny.train_tokenizer(["Write a few lowercase letters.", "Again."], vocab_size=280)
