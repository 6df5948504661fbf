"""Sampling the next token of every row of a decode step at once, each row from its own stream.

A row's randomness is a stream of uniforms drawn once, when its request arrives, from a
generator seeded with the request's seed (:func:`request_uniforms`); its k-th token is drawn by
inverting the cumulative distribution of its k-th step at its k-th uniform
(:func:`sample_rows`). All rows are sampled with the same few tensor operations, without a
per-row generator call or host sync, and a row's tokens depend only on its own logits and its
own seed: a completion is the same alone or in a batch, unless its logits differ there. They
can, in the last bits, because batched matrix products and padding change the order of float
additions (more so in bfloat16 than in float32); a draw then changes only when its uniform
falls within that difference of a boundary between two tokens' cumulative probabilities, and
the distribution sampled from is the same either way.

>>> import torch
>>> logits = torch.tensor([[0.0, 10.0, 0.0], [10.0, 0.0, 0.0]])
>>> tokens, logprobs = sample_rows(logits, torch.tensor([0.5, 0.5], dtype=torch.float64))
>>> tokens.tolist()
[1, 0]
"""

from __future__ import annotations

from typing import Any


def request_uniforms(seed: int, count: int) -> Any:
    """The uniforms in [0, 1) (float64) a request with ``seed`` samples its ``count`` tokens at."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.rand(count, generator=generator, dtype=torch.float64)


def sample_rows(
    logits: Any,
    uniforms: Any,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
) -> tuple[Any, Any]:
    """The next token of each row of ``logits`` (rows x vocabulary) and its logprob.

    Row ``i`` draws from ``softmax(logits[i] / temperature)``, narrowed to its ``top_k`` most
    likely tokens and then to the smallest set of those holding ``top_p`` of their mass, at
    the uniform ``uniforms[i]``. The logprob is that of the temperature-scaled distribution
    (the narrowing changes what is drawn, not the reported logprob); ``temperature == 0`` takes
    the most likely token, with its logprob at temperature 1.
    """
    import torch

    if temperature == 0:
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        tokens = logprobs.argmax(dim=-1)
        return tokens, logprobs.gather(-1, tokens[:, None])[:, 0]
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    probs = logprobs.exp()
    if top_p < 1.0 or (top_k is not None and top_k < probs.shape[-1]):
        probs, order = _narrowed(probs, top_p, top_k)
        tokens = order.gather(-1, _inverse_cdf(probs, uniforms))[:, 0]
    else:
        tokens = _inverse_cdf(probs, uniforms)[:, 0]
    return tokens, logprobs.gather(-1, tokens[:, None])[:, 0]


def _narrowed(probs: Any, top_p: float, top_k: int | None) -> tuple[Any, Any]:
    """``probs`` sorted in decreasing order with the tokens outside top-k and then top-p set to
    0, and the vocabulary order that sorts them."""
    if top_k is not None and top_k < probs.shape[-1]:
        probs, order = probs.topk(top_k, dim=-1)  # sorted, largest first
    else:
        probs, order = probs.sort(dim=-1, descending=True)
    if top_p < 1.0:
        mass_before = probs.cumsum(dim=-1) - probs
        kept_mass = probs.sum(dim=-1, keepdim=True)
        probs = probs.masked_fill(mass_before >= top_p * kept_mass, 0.0)
    return probs, order


def _inverse_cdf(probs: Any, uniforms: Any) -> Any:
    """Per row, the first index whose cumulative probability exceeds ``uniforms`` times the
    row's total (rows x 1); tokens of probability 0 are never chosen."""
    import torch

    cdf = probs.double().cumsum(dim=-1)
    total = cdf[:, -1:]
    index = torch.searchsorted(cdf, uniforms.to(cdf.device)[:, None] * total, right=True)
    # a product that rounds up to the total would run past the end: take the last token
    # with a positive probability (the first position where the cdf reaches the total)
    return torch.minimum(index, (cdf < total).sum(dim=-1, keepdim=True))
