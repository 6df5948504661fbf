"""A tiny random-init causal LM built locally (no downloads), for update-step tests."""

from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB_SIZE = 64


def tiny_qwen2(seed: int = 0) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with head_dim 64 and a 64-token vocabulary, in float32."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config).float()
