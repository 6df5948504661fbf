"""The HF agent's running decode: requests join between two decode steps and leave when done.

The rows decoded together share one KV cache, left-padded to a common width. A request that
joins is prefilled with the others that arrived with it (its prompt's last position also
gives its first token), and its cache is appended to the running one; each decode step then
runs one forward pass over the last token of every row and samples every row's next token
with :func:`~palaestra.agents.hf_sampling.sample_rows`, with one host sync for the whole step
(its tokens and logprobs). A row that has sampled a stop token or its ``max_tokens`` leaves
at once, and the cache columns no remaining row uses are dropped.

Joining a running decode edits the cache's key and value tensors, which is done for caches
whose layers are all plain ``DynamicLayer`` (full attention: Qwen2, Llama, Mistral without a
sliding window, ...). For other caches (sliding-window or linear-attention layers) requests
join only when no row is running, so each decode runs from start to end with the requests
that arrived together.
"""

from __future__ import annotations

import concurrent.futures
import inspect
from dataclasses import dataclass, field
from typing import Any

from palaestra.agents.base import Action, Sampling
from palaestra.agents.hf_sampling import request_uniforms, sample_rows


@dataclass(slots=True)
class DecodeRequest:
    """A prompt to continue, the seed of its sampling stream, the most tokens to sample, and
    where its action goes."""

    prompt_ids: list[int]
    seed: int
    max_tokens: int
    result: concurrent.futures.Future[Action] = field(default_factory=concurrent.futures.Future)


@dataclass(slots=True)
class _Row:
    request: DecodeRequest
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def cached(self) -> int:
        """Positions of this row in the KV cache: its prompt and every sampled token but the
        last (which is the next step's input)."""
        return len(self.request.prompt_ids) + len(self.token_ids) - 1


@dataclass(slots=True)
class _Prefill:
    """Requests prefilled together, not yet part of the running decode."""

    rows: list[_Row]
    cache: Any
    mask: Any
    tokens: Any
    uniforms: Any
    sampled: Any


class RunningDecode:
    """Rows decoded together with one KV cache (see the module docstring).

    ``admit`` prefills new requests and adds them, ``step`` decodes one token for every row,
    ``pop_finished`` removes the rows that are done and returns their actions.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        sampling: Sampling,
        stop_token_ids: list[int],
        device: Any,
        top_k: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.top_k = top_k
        self.stop_token_ids = set(stop_token_ids)
        self.pad_id = 0  # padding is masked out: any id of the vocabulary does
        self.device = device
        self.rows: list[_Row] = []
        self.joins_running = _cache_is_joinable(model)
        """Whether requests may join while rows are running (else only an empty decode)."""
        self._forward_names = _forward_names(model)
        self._reset()

    def admit(self, requests: list[DecodeRequest]) -> None:
        """Prefill ``requests`` together, sample their first tokens and add them as rows.

        An error in the prefill (e.g. a token id outside the vocabulary) leaves the running
        rows as they were; one while joining them (out of memory) fails them too."""
        prefill = self._prefill(requests)
        if not self.rows:
            self._cache, self._mask = prefill.cache, prefill.mask
            self._last_tokens, self._uniforms = prefill.tokens, prefill.uniforms
            self._sampled, self._positions = prefill.sampled, prefill.mask.sum(dim=-1)
        else:
            try:
                self._join(prefill)
            except Exception as exc:  # the running cache may be half-joined
                self.fail_all(exc)
                raise
        self.rows.extend(prefill.rows)

    def step(self) -> None:
        """Decode one token of every row: one forward pass, then one batched sample."""
        import torch

        ones = self._mask.new_ones((len(self.rows), 1))
        self._mask = torch.cat([self._mask, ones], dim=1)
        logits = self._forward(
            self._last_tokens[:, None], self._mask, self._positions[:, None], self._cache
        )
        self._positions = self._positions + 1
        self._last_tokens = self._sample(logits, self.rows, self._uniforms, self._sampled)
        self._sampled = self._sampled + 1

    def pop_finished(self) -> list[tuple[DecodeRequest, Action]]:
        """Remove the rows that sampled a stop token or ``max_tokens`` tokens; their actions."""
        done = [i for i, row in enumerate(self.rows) if self._is_done(row)]
        if not done:
            return []
        finished = [self.rows[i] for i in done]
        keep = sorted(set(range(len(self.rows))) - set(done))
        self.rows = [self.rows[i] for i in keep]
        if self.rows:
            self._keep_rows(keep)
        else:
            self._reset()
        return [(row.request, self._action(row)) for row in finished]

    def fail_all(self, error: BaseException) -> None:
        """Give every running row ``error`` and start empty."""
        for row in self.rows:
            row.request.result.set_exception(error)
        self.rows = []
        self._reset()

    # -- internals ------------------------------------------------------------------------

    def _reset(self) -> None:
        self._cache = self._mask = self._positions = self._last_tokens = None
        self._uniforms = self._sampled = None

    def _prefill(self, requests: list[DecodeRequest]) -> _Prefill:
        import torch

        ids, mask = _left_padded([r.prompt_ids for r in requests], self.pad_id, self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = _new_cache(self.model)
        logits = self._forward(ids, mask, positions, cache)
        rows = [_Row(request) for request in requests]
        count = self.sampling.max_tokens
        uniforms = torch.stack([request_uniforms(r.seed, count) for r in requests])
        uniforms = uniforms.to(self.device)
        sampled = torch.zeros(len(rows), dtype=torch.long, device=self.device)
        tokens = self._sample(logits, rows, uniforms, sampled)
        return _Prefill(rows, cache, mask, tokens, uniforms, sampled + 1)

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        """The logits of the last position of each row (rows x vocabulary)."""
        import torch

        kwargs = {self._forward_names.cache: cache}
        if self._forward_names.logits_to_keep:
            kwargs["logits_to_keep"] = 1  # not the whole prompt's vocabulary-wide logits
        with torch.no_grad():
            out = self.model(
                input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **kwargs
            )
        return out.logits[:, -1, :]

    def _sample(self, logits: Any, rows: list[_Row], uniforms: Any, sampled: Any) -> Any:
        """Sample each row's next token at its uniform number ``sampled`` (its tokens so far),
        record it with its logprob (one host sync) and return the tokens (on the device, the
        next step's input)."""
        tokens, logprobs = sample_rows(
            logits,
            uniforms.gather(1, sampled[:, None])[:, 0],
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            top_k=self.top_k,
        )
        for row, token, logprob in zip(rows, tokens.tolist(), logprobs.tolist(), strict=True):
            row.token_ids.append(token)
            row.logprobs.append(logprob)
        return tokens

    def _join(self, prefill: _Prefill) -> None:
        """Append the prefilled rows' cache, mask and state to the running ones."""
        import torch

        width = max(self._mask.shape[1], prefill.mask.shape[1])
        for layer, new in zip(_layers(self._cache), _layers(prefill.cache), strict=True):
            layer.keys = torch.cat([_pad_left(layer.keys, width), _pad_left(new.keys, width)])
            layer.values = torch.cat([_pad_left(layer.values, width), _pad_left(new.values, width)])
        self._mask = torch.cat([_pad_left(self._mask, width), _pad_left(prefill.mask, width)])
        self._positions = torch.cat([self._positions, prefill.mask.sum(dim=-1)])
        self._last_tokens = torch.cat([self._last_tokens, prefill.tokens])
        self._uniforms = torch.cat([self._uniforms, prefill.uniforms])
        self._sampled = torch.cat([self._sampled, prefill.sampled])

    def _keep_rows(self, keep: list[int]) -> None:
        """Keep only rows ``keep`` (in order) and drop the leading columns none of them uses."""
        import torch

        index = torch.tensor(keep, device=self._mask.device)
        unused = self._mask.shape[1] - max(row.cached for row in self.rows)
        for layer in _layers(self._cache):
            layer.keys = layer.keys[index, :, unused:]
            layer.values = layer.values[index, :, unused:]
        self._mask = self._mask[index, unused:]
        self._positions = self._positions[index]
        self._last_tokens = self._last_tokens[index]
        self._uniforms = self._uniforms[index]
        self._sampled = self._sampled[index]

    def _is_done(self, row: _Row) -> bool:
        return (
            row.token_ids[-1] in self.stop_token_ids or len(row.token_ids) >= row.request.max_tokens
        )

    def _action(self, row: _Row) -> Action:
        text = self.tokenizer.decode(row.token_ids, skip_special_tokens=True)
        stopped = row.token_ids[-1] in self.stop_token_ids
        return Action(text, row.token_ids, row.logprobs, "stop" if stopped else "length")


@dataclass(frozen=True, slots=True)
class _ForwardNames:
    cache: str
    logits_to_keep: bool


def _forward_names(model: Any) -> _ForwardNames:
    """How this transformers version's forward takes the cache (``cache`` from 5.2x on,
    ``past_key_values`` before) and whether it can skip the logits of all but the last
    position (``logits_to_keep``)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    cache = "cache" if "cache" in parameters else "past_key_values"
    return _ForwardNames(cache, "logits_to_keep" in parameters)


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def _layers(cache: Any) -> list[Any]:
    return list(cache.layers)


def _cache_is_joinable(model: Any) -> bool:
    """Whether every layer of the model's cache is a plain ``DynamicLayer`` (key and value
    tensors of shape rows x heads x positions x head size, nothing else)."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in _layers(_new_cache(model)))


def _pad_left(values: Any, width: int) -> Any:
    """``values`` (mask: rows x columns; keys/values: rows x heads x columns x size) padded
    with zeros on the left of its column axis to ``width`` columns."""
    import torch

    if values.dim() == 2:
        return torch.nn.functional.pad(values, (width - values.shape[1], 0))
    return torch.nn.functional.pad(values, (0, 0, width - values.shape[2], 0))


def _left_padded(prompts: list[list[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """``prompts`` as one ``(rows, longest)`` tensor padded on the left, and its attention mask."""
    import torch

    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids.to(device), attention_mask.to(device)
