"""A tiny random-init causal LM built locally (no downloads) and on-policy episodes for it."""

from __future__ import annotations

import torch
from transformers import Qwen2ForCausalLM

from palaestra.core.types import Episode
from palaestra.trainers import tiny
from palaestra.trainers.batch import TrainBatch
from palaestra.trainers.update import sequence_logprobs
from tests.trainers.factories import episode, with_tokens

VOCAB_SIZE = 64


def tiny_qwen2(seed: int = 0) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with head_dim 64 and a 64-token vocabulary, in float32."""
    return tiny.tiny_qwen2(VOCAB_SIZE, seed=seed, max_positions=256)


def on_policy_episodes(model, turns_per_episode: list[int], seed: int = 0) -> list[Episode]:
    """Episodes of random tokens whose policy-token logprobs are the model's own (on-policy)."""
    generator = torch.Generator().manual_seed(seed)
    episodes = []
    for turns in turns_per_episode:
        shape = episode([0.0] * turns, tokens_per_turn=3, prompt_tokens=2)
        ids = torch.randint(0, VOCAB_SIZE, (len(shape.token_ids),), generator=generator)
        with torch.no_grad():
            logp, _ = sequence_logprobs(model, ids[None], torch.ones_like(ids)[None])
        logprobs = [float(lp) if m else 0.0 for lp, m in zip(logp[0], shape.loss_mask, strict=True)]
        episodes.append(with_tokens(shape, ids.tolist(), logprobs))
    return episodes


def mean_policy_logp(model, batch: TrainBatch, rows: list[int]) -> float:
    with torch.no_grad():
        logp, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
    mask = batch.loss_mask[rows]
    return float((logp[rows] * mask).sum() / mask.sum())
