"""Fixtures: a tiny tokenizer with a real chat template."""

from tests.chat_templates import qwen25_tokenizer

__all__ = ["qwen25_tokenizer"]
