"""An agent that generates with a Hugging Face ``transformers`` model in this process.

Token-in, token-out: it continues ``Conversation.prompt_ids`` and reports the sampled ids and
their logprobs, so the runner's token sequence is exact. Generation runs in a worker thread,
one request at a time (a CPU fallback and a reference, not a fast server).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from palaestra.agents.base import Action, Conversation, Sampling


class HFAgent:
    """Generates with ``AutoModelForCausalLM`` from a local path (or given model/tokenizer).

    ``stop_token_ids`` end a completion (default: the tokenizer's EOS and the chat template's
    end-of-turn token where it has one, e.g. ``<|im_end|>``).

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
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

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
        self._lock = threading.Lock()  # one generate at a time, from any event loop

    async def act(self, conversation: Conversation) -> Action:
        prompt_ids = conversation.prompt_ids
        if prompt_ids is None:
            prompt_ids = self.tokenizer.apply_chat_template(
                conversation.messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        seed = int(conversation.rng.integers(2**31))
        return await asyncio.to_thread(self._generate, list(prompt_ids), seed)

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Copy ``state_dict`` into the model between two generations (never during one)."""
        with self._lock:
            self.model.load_state_dict(state_dict)
            self.model.eval()

    def _generate(self, prompt_ids: list[int], seed: int) -> Action:
        with self._lock:
            return self._generate_locked(prompt_ids, seed)

    def _generate_locked(self, prompt_ids: list[int], seed: int) -> Action:
        import torch

        torch.manual_seed(seed)
        greedy = self.sampling.temperature == 0
        inputs = torch.tensor([prompt_ids], device=self.device)
        with torch.no_grad():
            out = self.model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=self.sampling.max_tokens,
                do_sample=not greedy,
                temperature=None if greedy else self.sampling.temperature,
                top_p=None if greedy else self.sampling.top_p,
                top_k=None,
                eos_token_id=self.stop_token_ids,
                pad_token_id=self.stop_token_ids[0],
                output_logits=True,
                return_dict_in_generate=True,
            )
        new_ids = out.sequences[0, len(prompt_ids) :].tolist()
        logits = torch.stack([step[0] for step in out.logits])[: len(new_ids)].float()
        if not greedy:
            logits = logits / self.sampling.temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        chosen = logprobs[torch.arange(len(new_ids)), torch.tensor(new_ids)].tolist()
        finished = bool(new_ids) and new_ids[-1] in self.stop_token_ids
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        return Action(text, new_ids, chosen, "stop" if finished else "length")


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
