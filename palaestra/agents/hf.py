"""An agent that generates with a Hugging Face ``transformers`` model in this process.

Token-in, token-out: it continues ``Conversation.prompt_ids`` and reports the sampled ids and
their logprobs, so the runner's token sequence is exact. Concurrent requests (the runner's
episodes in flight) are decoded together by one generation thread, with continuous batching
in fixed slots (:mod:`palaestra.agents.hf_decode`): a request that arrives while others are
decoding joins them at the next decode step, and a finished one leaves at once. The thread
lives as long as the agent (``aclose`` ends it), so what attention backends cache per thread
and per shape stays warm from one rollout to the next. Every row of a step is
sampled with a few batched tensor operations, from the request's own stream of uniforms
seeded from the episode (:mod:`palaestra.agents.hf_sampling`), so a completion does not depend
on which other requests shared its steps (up to float rounding of the logits; see there).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections import Counter
from typing import Any

from palaestra.agents.base import Action, Conversation, Sampling
from palaestra.agents.devices import resolve_device
from palaestra.agents.hf_decode import DecodeRequest, RunningDecode
from palaestra.core.messages import continues_message

_STOP = None
"""Put on the request queue by ``aclose`` (or when the agent is garbage-collected): the
generation thread ends once the decode running then is done."""


class HFAgent:
    """Generates with ``AutoModelForCausalLM`` from a local path (or given model/tokenizer).

    ``stop_token_ids`` end a completion (default: the tokenizer's EOS and the chat template's
    end-of-turn token where it has one, e.g. ``<|im_end|>``). ``device`` is ``auto`` (the GPU
    when there is one; the default), ``cpu``, ``cuda`` or ``cuda:N``. Up to ``max_batch``
    requests are decoded together; a decode that starts waits ``gather_s`` seconds for
    more requests after each that arrives. ``top_k`` narrows sampling to the k most likely
    tokens (before ``sampling.top_p``). ``await agent.aclose()`` ends its generation thread.

    >>> agent = HFAgent("path/to/model", sampling=Sampling(max_tokens=64))  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        *,
        tokenizer: Any = None,
        sampling: Sampling | None = None,
        stop_token_ids: list[int] | None = None,
        device: str | None = None,
        dtype: str = "float32",
        max_batch: int = 256,
        gather_s: float = 0.002,
        top_k: int | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if gather_s < 0:
            raise ValueError(f"gather_s must be >= 0, got {gather_s}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or None for no limit), got {top_k}")
        self.name = f"hf:{model}" if isinstance(model, str) else "hf"
        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype))
        if tokenizer is None:
            raise ValueError("pass tokenizer= along with a model object")
        self.device = resolve_device(device or "auto")
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()
        self.stop_token_ids = stop_token_ids or default_stop_ids(tokenizer)
        self.top_k = top_k
        self.max_batch = max_batch
        self.gather_s = gather_s
        self.step_rows: Counter[int] = Counter()
        """How many decode steps ran with each number of rows (prefills not counted)."""
        self._requests: queue.SimpleQueue[DecodeRequest | None] = queue.SimpleQueue()
        self._worker_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False
        weakref.finalize(self, self._requests.put, _STOP)
        self._swap = threading.Condition()  # a weight load waits for the running decode
        self._loads_waiting = 0
        self._decoding = False

    async def act(self, conversation: Conversation) -> Action:
        prompt_ids = conversation.prompt_ids
        if prompt_ids is None:
            messages = conversation.messages
            prompt_ids = self.tokenizer.apply_chat_template(
                messages,
                tools=conversation.tools or None,
                add_generation_prompt=not continues_message(messages),
                continue_final_message=continues_message(messages),
                tokenize=True,
                return_dict=False,
            )
        request = DecodeRequest(
            list(prompt_ids),
            int(conversation.rng.integers(2**31)),
            self.sampling.tokens_for(conversation),
        )
        with self._worker_lock:
            if self._closed:
                raise RuntimeError("this HFAgent was closed (aclose); make a new one")
            self._requests.put(request)
            if self._worker is None:
                self._worker = threading.Thread(
                    target=_generation_thread,
                    args=(weakref.ref(self), self._requests),
                    name="palaestra-hf-generate",
                    daemon=True,
                )
                self._worker.start()
        return await asyncio.wrap_future(request.result)

    async def aclose(self) -> None:
        """End the generation thread once the requests already made are answered; the agent
        takes no more."""
        with self._worker_lock:
            self._closed = True
            worker = self._worker
            self._requests.put(_STOP)
        if worker is not None:
            await asyncio.to_thread(worker.join)

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Copy ``state_dict`` into the model between two decodes: running completions finish
        with the old weights (no new request joins them meanwhile), later ones use the new."""
        with self._swap:
            self._loads_waiting += 1
            try:
                self._swap.wait_for(lambda: not self._decoding)
                self.model.load_state_dict(state_dict)
                self.model.eval()
            finally:
                self._loads_waiting -= 1
                self._swap.notify_all()

    def _new_decode(self) -> RunningDecode:
        return RunningDecode(
            self.model,
            self.tokenizer,
            sampling=self.sampling,
            stop_token_ids=self.stop_token_ids,
            device=self.device,
            top_k=self.top_k,
        )

    def _decode_until_idle(self, decode: RunningDecode, first: DecodeRequest) -> None:
        """Decode ``first``, the requests gathered with it and those that join it, until no
        row is left."""
        self._set_decoding(True)  # after any weight load waiting for it
        try:
            joining = [first, *self._take(self.max_batch - 1, wait_s=self.gather_s)]
            while True:
                self._admit(decode, joining)
                if not decode.rows:
                    return
                self.step_rows[len(decode.rows)] += 1
                try:
                    decode.step()
                except Exception as exc:  # every running completion hears of it
                    decode.fail_all(exc)
                _finish(decode)
                joining = self._joining(decode)
        finally:
            self._set_decoding(False)

    def _admit(self, decode: RunningDecode, joining: list[DecodeRequest]) -> None:
        """Add the requests of ``joining`` whose episode was not cancelled meanwhile (the
        others can no longer be); only those hear of an error in their prefill."""
        joining = [request for request in joining if request.result.set_running_or_notify_cancel()]
        if not joining:
            return
        try:
            decode.admit(joining)
        except Exception as exc:
            for request in joining:
                request.result.set_exception(exc)
        _finish(decode)

    def _joining(self, decode: RunningDecode) -> list[DecodeRequest]:
        """The requests that join the running ``decode`` now; none while a weight load waits
        (or when its cache takes no rows that join)."""
        if not decode.rows or not decode.joins_running or self._load_waiting():
            return []
        return self._take(self.max_batch - len(decode.rows), wait_s=0.0)

    def _take(self, count: int, *, wait_s: float) -> list[DecodeRequest]:
        """Up to ``count`` waiting requests, each waited for up to ``wait_s`` seconds."""
        taken: list[DecodeRequest] = []
        while len(taken) < count:
            try:
                request = (
                    self._requests.get(timeout=wait_s) if wait_s else self._requests.get_nowait()
                )
            except queue.Empty:
                break
            if request is _STOP:  # for the thread's loop, once this decode is done
                self._requests.put(_STOP)
                break
            taken.append(request)
        return taken

    def _load_waiting(self) -> bool:
        with self._swap:
            return self._loads_waiting > 0

    def _set_decoding(self, decoding: bool) -> None:
        with self._swap:
            if decoding:
                self._swap.wait_for(lambda: not self._loads_waiting)
            self._decoding = decoding
            self._swap.notify_all()


def _generation_thread(
    agent_ref: weakref.ref[HFAgent], requests: queue.SimpleQueue[DecodeRequest | None]
) -> None:
    """Serve the agent's requests until ``aclose`` (or until the agent is garbage-collected);
    between two decodes the thread holds the agent only weakly."""
    decode: RunningDecode | None = None
    try:
        while (first := requests.get()) is not _STOP:
            agent = agent_ref()
            if agent is None:
                break
            decode = decode or agent._new_decode()
            agent._decode_until_idle(decode, first)
            del agent
    finally:
        if decode is not None:
            decode.fail_all(RuntimeError("the HF agent's generation thread stopped"))
        agent = agent_ref()
        if agent is not None:  # after a crash, the next request starts a new thread
            with agent._worker_lock:
                if agent._worker is threading.current_thread():
                    agent._worker = None


def _finish(decode: RunningDecode) -> None:
    """Hand the finished rows their actions."""
    for request, action in decode.pop_finished():
        request.result.set_result(action)


def default_stop_ids(tokenizer: Any) -> list[int]:
    """EOS plus the chat template's end-of-turn token, where the vocabulary has one."""
    ids = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    for marker in ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"):
        token_id = tokenizer.convert_tokens_to_ids(marker)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id not in ids:
            ids.append(token_id)
    if not ids:
        raise ValueError("the tokenizer has no EOS token; pass stop_token_ids=[...]")
    return ids
