"""Token log-probabilities of a causal LM, without the float32 logits of a whole batch.

The vocabulary-wide logits are the largest tensor of an update: rows x tokens x vocabulary
(256 sequences of 200 tokens with Qwen2.5's 151,936-token vocabulary are 31 GB in float32).
:func:`sequence_logprobs` never holds them for more than ``CHUNK_LOGITS`` (rows x
vocabulary) at a time. For the model types of ``PLAIN_HEAD_MODEL_TYPES``, whose logits are
exactly the output embedding applied to the decoder's last hidden state, it runs the decoder,
then the head, softmax and gather on chunks of positions; under autograd, when there is more than one
chunk, each is checkpointed, so its logits are recomputed in the backward pass instead of
kept (one more head matmul per chunk). Other models give their logits in their own dtype from their own
forward pass, and only the float32 softmax is chunked. Padding positions are skipped.

>>> logp, entropy = sequence_logprobs(model, input_ids, attention_mask)  # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from palaestra.trainers.losses import token_entropy

CHUNK_LOGITS = 2**26
"""Logits (positions x vocabulary) computed at once: 256 MiB in float32."""

PLAIN_HEAD_MODEL_TYPES = frozenset(
    {"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "phi3", "gemma", "olmo2"}
)
"""Model types whose logits are ``lm_head(decoder(...).last_hidden_state)``, nothing more (no
soft-capping or scaling: Gemma 2/3, Cohere and Granite are not among them)."""


def sequence_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-probability of every token given the ones before it, aligned with ``input_ids``.

    ``logp[:, t] = log softmax(logits[:, t-1] / temperature)[input_ids[:, t]]`` where
    ``attention_mask[:, t]`` is 1, and 0 elsewhere (``logp[:, 0] = 0``); with ``with_entropy``
    also the entropy of the same distributions (0 where ``logp`` is). Dividing by the rollout
    temperature makes the logprobs those of the distribution the tokens were sampled from.
    """
    targets_present = attention_mask[:, 1:].bool()
    targets = input_ids[:, 1:][targets_present]
    split = plain_lm_head(model)
    if split is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        source, head = logits[:, :-1][targets_present], None
    else:
        decoder, head = split
        hidden = decoder(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state
        source = hidden[:, :-1][targets_present]
    logp, entropy = _chunked_logprobs(head, source, targets, temperature, with_entropy)
    return (
        _aligned(logp, targets_present),
        _aligned(entropy, targets_present) if with_entropy else None,
    )


def plain_lm_head(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """The decoder and output embedding of ``model`` (LoRA-wrapped or not) when its logits
    are the one applied to the other's last hidden state; else None."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES:
        return None
    try:
        decoder, head = model.get_decoder(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError, ValueError):
        return None
    if decoder is None or head is None:
        return None
    return decoder, head


def _chunked_logprobs(
    head: nn.Module | None,
    source: Tensor,
    targets: Tensor,
    temperature: float,
    with_entropy: bool,
) -> tuple[Tensor, Tensor]:
    """Logprobs (and entropies, else empty) of ``targets`` from ``source`` (hidden states, or
    logits when ``head`` is None), ``CHUNK_LOGITS // vocabulary`` positions at a time."""
    size = max(1, CHUNK_LOGITS // _vocabulary_size(head, source))
    # one chunk is kept for the backward pass as it is; several are recomputed there
    recompute = torch.is_grad_enabled() and source.requires_grad and source.shape[0] > size
    parts = []
    for start in range(0, source.shape[0], size):
        chunk = (source[start : start + size], targets[start : start + size])
        if recompute:
            part = checkpoint(
                _chunk_logprobs, head, *chunk, temperature, with_entropy, use_reentrant=False
            )
        else:
            part = _chunk_logprobs(head, *chunk, temperature, with_entropy)
        parts.append(part)
    if not parts:
        empty = source.new_zeros(0, dtype=torch.float32)
        return empty, empty
    logp, entropy = zip(*parts, strict=True)
    return torch.cat(logp), torch.cat(entropy)


def _chunk_logprobs(
    head: nn.Module | None,
    source: Tensor,
    targets: Tensor,
    temperature: float,
    with_entropy: bool,
) -> tuple[Tensor, Tensor]:
    logits = (source if head is None else head(source)).float() / temperature
    logp = logits.gather(-1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
    entropy = token_entropy(logits) if with_entropy else logp.new_zeros(0)
    return logp, entropy


def _vocabulary_size(head: nn.Module | None, source: Tensor) -> int:
    return source.shape[-1] if head is None else int(head.weight.shape[0])


def _aligned(values: Tensor, present: Tensor) -> Tensor:
    """``values`` of the positions where ``present`` is set, as a (rows x tokens) tensor with
    a leading zero column and zeros elsewhere."""
    out = values.new_zeros(present.shape[0], present.shape[1] + 1)
    out[:, 1:][present] = values
    return out
