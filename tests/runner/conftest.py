"""Fixtures: tiny tokenizers with real chat templates."""

from tests.chat_templates import llama3_tokenizer, qwen3_tokenizer, qwen25_tokenizer

__all__ = ["llama3_tokenizer", "qwen3_tokenizer", "qwen25_tokenizer"]
