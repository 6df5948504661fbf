"""The HF agent's running decode: requests join between two decode steps and leave when done.

For models whose cache is plain full attention (Qwen2, Llama, Mistral without a sliding
window, ...) and whose attention takes an additive mask (``sdpa``, ``eager``), the rows decode
in the fixed slots of a :class:`~palaestra.agents.hf_slots.SlotCache`, so the steps keep a few
fixed shapes. Requests that join are prefilled together, left-padded to bucketed shapes (a
power of two of rows, a multiple of :data:`~palaestra.agents.hf_slots.WIDTH_STEP` of columns;
the prompt's last position also gives the first token), and their cache is copied into free
slots; each decode step then runs one forward pass over every slot's last token and samples
every slot's next token with :func:`~palaestra.agents.hf_sampling.sample_rows`, with one host
sync for the whole step (its tokens and logprobs). A row that has sampled a stop token or its
``max_tokens`` frees its slot at once.

Other caches (sliding-window or linear-attention layers) cannot take rows that join: there
requests join only when no row is running, and each decode runs the requests that arrived
together in one batch from start to end (a finished row stays in it, no longer sampled from).
"""

from __future__ import annotations

import concurrent.futures
import inspect
from dataclasses import dataclass, field
from typing import Any

from palaestra.agents.base import Action, Sampling
from palaestra.agents.hf_sampling import request_uniforms, sample_rows
from palaestra.agents.hf_slots import SlotCache, bucket_rows, bucket_width


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
    index: int = 0
    """Its row of the batch (its slot in a slot cache)."""
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


class _WholeBatch:
    """The cache of one prefill, decoded from start to end (for caches that cannot take rows
    that join): a step appends a column to the mask."""

    def __init__(self, prefill: _Prefill) -> None:
        self.cache, self.mask = prefill.cache, prefill.mask
        self.positions = prefill.mask.sum(dim=-1)
        self.occupied = self.positions.new_ones(len(prefill.rows))

    def step_inputs(self) -> tuple[Any, Any]:
        import torch

        self.mask = torch.cat([self.mask, self.mask.new_ones((self.mask.shape[0], 1))], dim=1)
        return self.mask, self.positions[:, None]

    def advance(self) -> None:
        self.positions = self.positions + 1

    def free(self, rows: list[int]) -> None:
        self.occupied[self.occupied.new_tensor(rows)] = 0


class RunningDecode:
    """Rows decoded together (see the module docstring).

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
        self.joins_running = _cache_is_joinable(model) and _takes_additive_masks(model)
        """Whether requests may join while rows are running, into slots (else only an empty
        decode, as one batch)."""
        self._forward_names = _forward_names(model)
        self._most_slots = 0
        """The most slots a decode used so far: the next one starts with as many, so that
        its shapes are those seen before (its cache is freed between decodes)."""
        self._reset()

    def admit(self, requests: list[DecodeRequest]) -> None:
        """Prefill ``requests`` together, sample their first tokens and add them as rows.

        An error in the prefill (e.g. a token id outside the vocabulary) leaves the running
        rows as they were; one while joining them (out of memory) fails them too."""
        if self.rows and not self.joins_running:
            raise RuntimeError("this model's cache cannot take rows while others decode")
        prefill = self._prefill(requests)
        try:
            self._join(prefill)
        except Exception as exc:  # the running state may be half-joined
            self.fail_all(exc)
            raise
        self.rows.extend(prefill.rows)

    def step(self) -> None:
        """Decode one token of every row: one forward pass, then one batched sample."""
        if isinstance(self._batch, SlotCache):
            self._batch.reserve(0, 1 + max(row.cached for row in self.rows))
        mask, positions = self._batch.step_inputs()
        cache = self._batch if isinstance(self._batch, SlotCache) else self._batch.cache
        logits = self._forward(self._last_tokens[:, None], mask, positions, cache)
        self._batch.advance()
        self._last_tokens = self._sample(logits, self.rows, self._uniforms, self._sampled)
        self._sampled = self._sampled + self._batch.occupied

    def pop_finished(self) -> list[tuple[DecodeRequest, Action]]:
        """Remove the rows that sampled a stop token or ``max_tokens`` tokens; their actions."""
        finished = [row for row in self.rows if self._is_done(row)]
        if not finished:
            return []
        self.rows = [row for row in self.rows if not self._is_done(row)]
        if self.rows:
            freed = [row.index for row in finished]
            self._batch.free(freed)
            self._sampled[self._sampled.new_tensor(freed)] = 0
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
        self._batch: SlotCache | _WholeBatch | None = None
        self._last_tokens = self._uniforms = self._sampled = None

    def _prefill(self, requests: list[DecodeRequest]) -> _Prefill:
        """Prefill ``requests`` (bucketed for a slot cache: padded with copies of the first
        prompt to a power of two of rows, and in columns to a step of the slot width) and
        sample their first tokens."""
        import torch

        prompts = [request.prompt_ids for request in requests]
        width = max(len(prompt) for prompt in prompts)
        if self.joins_running:
            prompts += [prompts[0]] * (bucket_rows(len(prompts)) - len(prompts))
            width = bucket_width(width)
        ids, mask = _left_padded(prompts, width, self.pad_id, self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = _new_cache(self.model)
        logits = self._forward(ids, mask, positions, cache)[: len(requests)]
        rows = [_Row(request, index) for index, request in enumerate(requests)]
        count = self.sampling.max_tokens
        uniforms = torch.stack([request_uniforms(r.seed, count) for r in requests])
        uniforms = uniforms.to(self.device)
        first = torch.zeros(len(rows), dtype=torch.long, device=self.device)
        tokens = self._sample(logits, rows, uniforms, first)
        return _Prefill(rows, cache, mask, tokens, uniforms)

    def _join(self, prefill: _Prefill) -> None:
        """Add the prefilled rows: into free slots of the slot cache, or as the whole batch."""
        if not self.joins_running:
            self._batch = _WholeBatch(prefill)
            self._last_tokens, self._uniforms = prefill.tokens, prefill.uniforms
            self._sampled = prefill.tokens.new_ones(len(prefill.rows))
            return
        layers = [(layer.keys, layer.values) for layer in _layers(prefill.cache)]
        lengths = [len(row.request.prompt_ids) for row in prefill.rows]
        if self._batch is None:
            self._batch = SlotCache(len(layers))
        columns = max(
            prefill.mask.shape[1], 1 + max(row.cached for row in self.rows + prefill.rows)
        )
        slots = max(len(self.rows) + len(prefill.rows), self._most_slots)
        self._batch.reserve(slots, columns, like=layers[0][0])
        self._most_slots = self._batch.slots
        self._grow_row_state(self._batch.slots, prefill.uniforms)
        slots = self._batch.place(layers, lengths)
        index = self._last_tokens.new_tensor(slots)
        self._last_tokens[index] = prefill.tokens
        self._uniforms[index] = prefill.uniforms
        self._sampled[index] = 1
        for row, slot in zip(prefill.rows, slots, strict=True):
            row.index = slot

    def _grow_row_state(self, slots: int, like_uniforms: Any) -> None:
        """Size the per-slot sampling state (uniforms, last tokens, tokens sampled) to
        ``slots``, keeping what the running slots hold."""
        import torch

        if self._last_tokens is not None and self._last_tokens.shape[0] == slots:
            return
        zeros = torch.zeros(slots, dtype=torch.long, device=like_uniforms.device)
        grown = (like_uniforms.new_zeros((slots, like_uniforms.shape[1])), zeros, zeros.clone())
        if self._last_tokens is not None:
            for new, old in zip(
                grown, (self._uniforms, self._last_tokens, self._sampled), strict=True
            ):
                new[: old.shape[0]] = old
        self._uniforms, self._last_tokens, self._sampled = grown

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
        """Sample each batch row's next token at its uniform number ``sampled`` (its tokens so
        far), record those of ``rows`` with their logprobs (one host sync) and return the
        tokens (on the device, the next step's input)."""
        tokens, logprobs = sample_rows(
            logits,
            uniforms.gather(1, sampled[:, None])[:, 0],
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            top_k=self.top_k,
        )
        token_list, logprob_list = tokens.tolist(), logprobs.tolist()
        for row in rows:
            row.token_ids.append(token_list[row.index])
            row.logprobs.append(logprob_list[row.index])
        return tokens

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


def _takes_additive_masks(model: Any) -> bool:
    """Whether the model's attention takes a custom additive 4D mask (``sdpa``, ``eager``), as
    decoding in slots needs."""
    return getattr(model.config, "_attn_implementation", None) in ("sdpa", "eager")


def _left_padded(prompts: list[list[int]], width: int, pad: int, device: Any) -> tuple[Any, Any]:
    """``prompts`` as one ``(rows, width)`` tensor padded on the left, and its attention mask."""
    import torch

    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids.to(device), attention_mask.to(device)
