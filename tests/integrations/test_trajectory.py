"""split_episode: the runner's token sequence as prompt and response, tool results masked."""

from __future__ import annotations

import asyncio

import pytest

from palaestra.agents.base import Conversation
from palaestra.integrations.trajectory import EngineAgent, split_episode

pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")


@pytest.fixture(scope="module")
def tool_episode():
    from palaestra.trainers import tiny
    from palaestra.trainers.sft import collect_demonstrations

    tokenizer = tiny.train_tokenizer(["What is 3 + 4?"], vocab_size=300)
    (episode,) = collect_demonstrations("math:Arithmetic-Python-v0", [0], tokenizer)
    return tokenizer, episode


def test_tool_results_are_masked_in_the_response(tool_episode):
    tokenizer, episode = tool_episode
    assert episode.turns[0].observation_role == "tool"
    trajectory = split_episode(episode)
    assert trajectory.prompt_ids + trajectory.response_ids == episode.token_ids
    ids, mask = trajectory.response_ids, trajectory.response_mask
    masked = tokenizer.decode([t for t, bit in zip(ids, mask, strict=True) if not bit])
    trained = tokenizer.decode([t for t, bit in zip(ids, mask, strict=True) if bit])
    assert "<|im_start|>tool" in masked and episode.turns[0].observation.strip() in masked
    assert "<tool_call>" in trained and "<|im_start|>tool" not in trained
    assert trajectory.reward == 1.0 and trajectory.num_turns == 2


def test_response_cut_to_a_length(tool_episode):
    _, episode = tool_episode
    trajectory = split_episode(episode, max_response_tokens=7)
    assert len(trajectory.response_ids) == len(trajectory.response_logprobs) == 7


def test_engine_agent_needs_token_prompts(tool_episode):
    tokenizer, _ = tool_episode

    async def never(prompt_ids):
        raise AssertionError("not called")

    agent = EngineAgent(never, tokenizer)
    with pytest.raises(RuntimeError, match="token prompts"):
        asyncio.run(agent.act(Conversation([{"role": "user", "content": "hi"}])))
