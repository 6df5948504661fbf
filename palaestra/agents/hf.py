"""An agent that generates with a Hugging Face ``transformers`` model in this process.

Token-in, token-out: it continues ``Conversation.prompt_ids`` and reports the sampled ids and
their logprobs, so the runner's token sequence is exact. Concurrent requests (the runner's
episodes in flight) are generated together: a worker thread gathers the requests waiting,
left-pads them into one batch and decodes it with a KV cache. Each request samples from its
own generator, seeded from the episode, so a completion does not depend on which other
requests shared its batch (up to float rounding).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from palaestra.agents.base import Action, Conversation, Sampling
from palaestra.core.messages import continues_message

_WORKER_IDLE_S = 5.0
"""How long the generation thread waits for a request before it exits (a new one restarts it)."""


@dataclass(slots=True)
class _Request:
    prompt_ids: list[int]
    seed: int
    result: concurrent.futures.Future[Action] = field(default_factory=concurrent.futures.Future)


class HFAgent:
    """Generates with ``AutoModelForCausalLM`` from a local path (or given model/tokenizer).

    ``stop_token_ids`` end a completion (default: the tokenizer's EOS and the chat template's
    end-of-turn token where it has one, e.g. ``<|im_end|>``). Up to ``max_batch`` requests are
    generated together; after the first request of a batch arrives, the batch waits for more
    until none has come for ``gather_s`` seconds.

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
        max_batch: int = 64,
        gather_s: float = 0.002,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if gather_s < 0:
            raise ValueError(f"gather_s must be >= 0, got {gather_s}")
        self.name = f"hf:{model}" if isinstance(model, str) else "hf"
        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype))
        if tokenizer is None:
            raise ValueError("pass tokenizer= along with a model object")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()
        self.stop_token_ids = stop_token_ids or default_stop_ids(tokenizer)
        self.max_batch = max_batch
        self.gather_s = gather_s
        self.batch_sizes: Counter[int] = Counter()
        """How many batches of each size were generated (for tests and tuning)."""
        self._model_lock = threading.Lock()  # a weight load never overlaps a generation
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._worker_lock = threading.Lock()
        self._worker: threading.Thread | None = None

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
        request = _Request(list(prompt_ids), int(conversation.rng.integers(2**31)))
        with self._worker_lock:
            self._requests.put(request)
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._serve, name="palaestra-hf-generate", daemon=True
                )
                self._worker.start()
        return await asyncio.wrap_future(request.result)

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Copy ``state_dict`` into the model between two generations (never during one)."""
        with self._model_lock:
            self.model.load_state_dict(state_dict)
            self.model.eval()

    def _serve(self) -> None:
        """The generation thread: gather waiting requests into batches until idle."""
        try:
            while self._serve_batch():
                pass
        finally:
            # An idle exit has already cleared the slot; after a crash, clearing it lets the
            # next request start a new thread.
            with self._worker_lock:
                if self._worker is threading.current_thread():
                    self._worker = None

    def _serve_batch(self) -> bool:
        """Generate one batch of waiting requests; False once idle (the thread then ends)."""
        try:
            first = self._requests.get(timeout=_WORKER_IDLE_S)
        except queue.Empty:
            with self._worker_lock:
                if self._requests.empty():
                    self._worker = None
                    return False
            return True
        batch = [first]
        while len(batch) < self.max_batch:
            try:
                batch.append(self._requests.get(timeout=self.gather_s))
            except queue.Empty:
                break
        # Requests whose episode was cancelled meanwhile are dropped; the rest can no longer be.
        batch = [request for request in batch if request.result.set_running_or_notify_cancel()]
        if not batch:
            return True
        try:
            with self._model_lock:
                actions = self._generate(batch)
        except Exception as exc:  # every waiting episode hears of it
            for request in batch:
                request.result.set_exception(exc)
        else:
            for request, action in zip(batch, actions, strict=True):
                request.result.set_result(action)
        return True

    def _generate(self, batch: list[_Request]) -> list[Action]:
        """Decode ``batch`` together: left-padded prompts, one forward pass per new token."""
        import torch

        self.batch_sizes[len(batch)] += 1
        rows = len(batch)
        pad = self.stop_token_ids[0]
        input_ids, attention_mask = _left_padded([r.prompt_ids for r in batch], pad, self.device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        generators = [
            torch.Generator(device=self.device).manual_seed(request.seed) for request in batch
        ]
        new_ids: list[list[int]] = [[] for _ in batch]
        logprobs: list[list[float]] = [[] for _ in batch]
        active = list(range(rows))
        past = None
        with torch.no_grad():
            for _ in range(self.sampling.max_tokens):
                out = self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    past_key_values=past,
                    use_cache=True,
                )
                past = out.past_key_values
                chosen = self._sample(out.logits[:, -1, :].float(), generators, active)
                next_ids = torch.full((rows, 1), pad, dtype=torch.long)
                for row, (token, logprob) in chosen.items():
                    new_ids[row].append(token)
                    logprobs[row].append(logprob)
                    next_ids[row, 0] = token
                active = [row for row in active if chosen[row][0] not in self.stop_token_ids]
                if not active:
                    break
                input_ids = next_ids.to(self.device)
                attention_mask = torch.cat(
                    [attention_mask, attention_mask.new_ones((rows, 1))], dim=1
                )
                position_ids = position_ids[:, -1:] + 1
        return [
            Action(
                self.tokenizer.decode(ids, skip_special_tokens=True),
                ids,
                row_logprobs,
                "stop" if ids and ids[-1] in self.stop_token_ids else "length",
            )
            for ids, row_logprobs in zip(new_ids, logprobs, strict=True)
        ]

    def _sample(
        self, logits: Any, generators: list[Any], active: list[int]
    ) -> dict[int, tuple[int, float]]:
        """The next token of each active row and its logprob under the temperature-scaled
        distribution (top-p narrows what is drawn, not the reported logprob)."""
        import torch

        sampling = self.sampling
        if sampling.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            tokens = logprobs.argmax(dim=-1)
            return {row: (int(tokens[row]), float(logprobs[row, tokens[row]])) for row in active}
        logprobs = torch.log_softmax(logits / sampling.temperature, dim=-1)
        probs = logprobs.exp()
        if sampling.top_p < 1.0:
            probs = _top_p(probs, sampling.top_p)
        chosen = {}
        for row in active:
            token = int(torch.multinomial(probs[row], 1, generator=generators[row]))
            chosen[row] = (token, float(logprobs[row, token]))
        return chosen


def _left_padded(prompts: list[list[int]], pad: int, device: str) -> tuple[Any, Any]:
    """``prompts`` as one ``(rows, longest)`` tensor padded on the left, and its attention mask."""
    import torch

    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def _top_p(probs: Any, top_p: float) -> Any:
    """``probs`` with each row cut to its smallest set of most likely tokens holding ``top_p``."""
    import torch

    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs)


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
