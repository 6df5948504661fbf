"""Model-free agents and agent specs."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

import palaestra
from palaestra.agents import (
    Conversation,
    HumanAgent,
    LatencyAgent,
    OracleAgent,
    PolicyAgent,
    RandomAgent,
    make_agent,
)
from palaestra.agents.openai import OpenAIAgent


def conversation_for(env_id: str, seed: int) -> Conversation:
    env = palaestra.make(env_id)
    observation, _ = env.reset(seed=seed)
    return Conversation([{"role": "user", "content": observation}], env=env, seed=(seed, 7))


def test_random_agent_plays_well_formed_moves_from_the_episode_rng():
    first = conversation_for("game:GuessTheNumber-v0", 0)
    second = conversation_for("game:GuessTheNumber-v0", 0)
    moves = [RandomAgent().act(first).text for _ in range(5)]
    assert moves == [RandomAgent().act(second).text for _ in range(5)]
    for move in moves:
        number = int(re.fullmatch(r"\\boxed\{(\d+)\}", move).group(1))
        assert 1 <= number <= 50
    assert len(set(moves)) > 1


def test_oracle_agent_keeps_one_policy_per_episode():
    conversation = conversation_for("game:GuessTheNumber-v0", 3)
    action = OracleAgent().act(conversation)
    assert action.text == "\\boxed{25}"
    assert "oracle" in conversation.state


def test_human_agent_reads_a_line_without_blocking_the_loop():
    prompts = []

    def fake_input(prompt: str) -> str:
        prompts.append(prompt)
        return "\\boxed{7}"

    conversation = Conversation([{"role": "user", "content": "Guess!"}])
    assert asyncio.run(HumanAgent(fake_input).act(conversation)).text == "\\boxed{7}"
    assert "Guess!" in prompts[0]


def test_latency_agent_delays_follow_the_requested_lognormal():
    agent = LatencyAgent(PolicyAgent(lambda obs: "x"), median_s=0.02, p99_s=0.2)
    rng = np.random.default_rng(0)
    delays = np.array([agent.sample_delay(rng) for _ in range(20000)])
    assert np.median(delays) == pytest.approx(0.02, rel=0.05)
    assert np.quantile(delays, 0.99) == pytest.approx(0.2, rel=0.1)
    with pytest.raises(ValueError, match="median_s <= p99_s"):
        LatencyAgent(agent, median_s=0.3, p99_s=0.2)


def test_make_agent_specs():
    assert isinstance(make_agent("oracle"), OracleAgent)
    assert isinstance(make_agent("random"), RandomAgent)
    agent = make_agent("openai:org/model-1@http://127.0.0.1:9/v1")
    assert isinstance(agent, OpenAIAgent) and agent.model == "org/model-1"
    asyncio.run(agent.aclose())
    with pytest.raises(ValueError, match="unknown agent spec 'gpt'"):
        make_agent("gpt")
    with pytest.raises(ValueError, match="unknown agent kind 'foo'"):
        make_agent("foo:bar")
    with pytest.raises(ValueError, match="write openai:MODEL@URL"):
        make_agent("openai:model-without-url")
    with pytest.raises(ValueError, match="takes no argument"):
        make_agent("oracle:x")
    with pytest.raises(ValueError, match="takes no options"):
        make_agent("random", temperature=0.5)
