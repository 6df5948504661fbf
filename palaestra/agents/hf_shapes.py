"""A census of the attention shapes a model's generation forwards meet, thread by thread.

Attention backends that plan per shape (cuDNN's scaled-dot-product attention, the default on
sm90) build a plan on the host the first time a thread meets a combination of query, key,
value and mask sizes, and reuse it after. A decode stays fast when, once warm, its forwards
meet shapes its thread has seen before. :class:`AttentionShapeCensus` counts that on any
machine: it wraps ``torch.nn.functional.scaled_dot_product_attention`` (what transformers'
``sdpa`` attention calls) and the model's forward, and records, per thread, each generation
forward (one given a cache) with whether it met a shape new to that thread and how long it
took. ``new_shape_cost_s`` charges a fixed time per new shape, a CPU stand-in for a plan build.

>>> census = AttentionShapeCensus()  # doctest: +SKIP
>>> with census.watch(model):  # doctest: +SKIP
...     generate_twice()
>>> census.new_share("palaestra-hf-generate")  # doctest: +SKIP
0.0
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GenerationForward:
    """One forward of a model given a cache: its query length (1 for a decode step), whether
    an attention call in it met a shape new to its thread, and its seconds."""

    query_length: int
    new_shape: bool
    seconds: float


@dataclass
class AttentionShapeCensus:
    """The generation forwards recorded, by thread name; each thread's shapes seen are its own
    (a new thread with the name of one that ended starts with none, as a plan cache would)."""

    new_shape_cost_s: float = 0.0
    forwards: dict[str, list[GenerationForward]] = field(default_factory=dict)
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextlib.contextmanager
    def watch(self, model: Any) -> Iterator[AttentionShapeCensus]:
        """Record ``model``'s generation forwards while the block runs."""
        import torch

        original = torch.nn.functional.scaled_dot_product_attention
        hooks = [
            model.register_forward_pre_hook(self._forward_starts, with_kwargs=True),
            model.register_forward_hook(self._forward_ends),
        ]

        def counted(query: Any, key: Any, value: Any, attn_mask: Any = None, **kwargs: Any) -> Any:
            self._attention(query, key, value, attn_mask)
            return original(query, key, value, attn_mask=attn_mask, **kwargs)

        torch.nn.functional.scaled_dot_product_attention = counted
        try:
            yield self
        finally:
            torch.nn.functional.scaled_dot_product_attention = original
            for hook in hooks:
                hook.remove()

    def clear_forwards(self) -> None:
        """Forget the forwards recorded so far (the shapes seen stay seen)."""
        with self._lock:
            self.forwards.clear()

    def new_share(self, thread: str, *, decode_only: bool = False) -> float:
        """The share of ``thread``'s recorded forwards (only decode steps, if ``decode_only``)
        that met a shape new to it."""
        forwards = self.recorded(thread, decode_only=decode_only)
        if not forwards:
            raise ValueError(f"no generation forward was recorded on thread {thread!r}")
        return sum(f.new_shape for f in forwards) / len(forwards)

    def recorded(self, thread: str, *, decode_only: bool = False) -> list[GenerationForward]:
        """``thread``'s recorded forwards (only decode steps, if ``decode_only``)."""
        forwards = self.forwards.get(thread, [])
        return [f for f in forwards if f.query_length == 1] if decode_only else list(forwards)

    # -- hooks --------------------------------------------------------------------------------

    def _forward_starts(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        cached = any(kwargs.get(name) is not None for name in ("cache", "past_key_values"))
        ids = kwargs.get("input_ids", args[0] if args else None)
        if not cached or ids is None:
            self._local.forward = None
            return
        self._local.forward = [ids.shape[1], False, time.perf_counter()]

    def _forward_ends(self, module: Any, args: Any, output: Any) -> None:
        forward = getattr(self._local, "forward", None)
        if forward is None:
            return
        self._local.forward = None
        query_length, new_shape, started = forward
        record = GenerationForward(query_length, new_shape, time.perf_counter() - started)
        with self._lock:
            self.forwards.setdefault(threading.current_thread().name, []).append(record)

    def _attention(self, query: Any, key: Any, value: Any, mask: Any) -> None:
        shape = tuple(
            None if t is None else (tuple(t.shape), t.stride(), t.dtype)
            for t in (query, key, value, mask)
        )
        seen = self._local.__dict__.setdefault("seen", set())
        if shape in seen:
            return
        seen.add(shape)
        forward = getattr(self._local, "forward", None)
        if forward is not None:
            forward[1] = True
        if self.new_shape_cost_s:
            time.sleep(self.new_shape_cost_s)
