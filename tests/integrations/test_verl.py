"""verl's agent loop over palaestra envs: prompt/response ids, response mask, logprobs, reward.

``play_row`` is the whole loop and needs no verl; ``PalaestraAgentLoop`` (registered in verl
when it is installed) is checked against verl itself where verl imports.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from palaestra.integrations.verl import AGENT_NAME, play_row, task_rows
from palaestra.runner.tokens import ChatTokenizer

pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")

ENV_ID = "game:GuessTheNumber-v0"


@pytest.fixture(scope="module")
def tokenizer():
    from palaestra.trainers import tiny

    return tiny.train_tokenizer(["I am thinking of an integer between 1 and 50."], vocab_size=300)


class AlwaysOne:
    """A server manager that always answers ``\\boxed{1}`` with logprob -0.25 per token."""

    def __init__(self, tokenizer):
        self.ids = tokenizer.encode(r"\boxed{1}<|im_end|>")
        self.request_ids: list[str] = []

    async def generate(self, *, request_id, prompt_ids, sampling_params):
        self.request_ids.append(request_id)
        return SimpleNamespace(
            token_ids=self.ids, log_probs=[-0.25] * len(self.ids), stop_reason=None
        )


def _play(tokenizer, server, **kwargs):
    row = task_rows(ENV_ID, [0])[0]
    return asyncio.run(play_row(server, tokenizer, {}, row["extra_info"], **kwargs))


def test_rows_select_the_palaestra_agent_loop():
    row = task_rows(ENV_ID, [7])[0]
    assert row["agent_name"] == AGENT_NAME == "palaestra"
    assert row["extra_info"] == {"env_id": ENV_ID, "seed": 7}
    assert row["prompt"][0]["role"] == "system"


def test_response_is_completions_and_masked_env_tokens(tokenizer):
    server = AlwaysOne(tokenizer)
    trajectory = _play(tokenizer, server, response_length=4096, max_turns=3)
    assert len(set(server.request_ids)) == 1 and len(server.request_ids) == 3  # one session
    row = task_rows(ENV_ID, [0])[0]
    assert trajectory.prompt_ids == ChatTokenizer(tokenizer).prompt_ids(row["prompt"])
    n = len(server.ids)
    mask, ids, logprobs = (
        trajectory.response_mask,
        trajectory.response_ids,
        trajectory.response_logprobs,
    )
    assert ids[:n] == server.ids and mask[:n] == [1] * n and logprobs[:n] == [-0.25] * n
    env_span = [i for i, bit in enumerate(mask) if bit == 0]
    feedback = tokenizer.decode([ids[i] for i in env_span])
    assert "too low" in feedback and all(logprobs[i] == 0.0 for i in env_span)
    assert sum(mask) == 3 * n and trajectory.num_turns == 3 and trajectory.reward == 0.0


def test_response_length_truncates(tokenizer):
    trajectory = _play(tokenizer, AlwaysOne(tokenizer), response_length=5, max_turns=3)
    assert len(trajectory.response_ids) == len(trajectory.response_mask) == 5


def test_agent_loop_against_installed_verl(tokenizer):
    pytest.importorskip("verl", reason="verl is not installed (it needs a GPU stack)")
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, _agent_loop_registry

    from palaestra.integrations.verl import PalaestraAgentLoop

    assert _agent_loop_registry[AGENT_NAME]["_target_"].endswith("PalaestraAgentLoop")
    loop = PalaestraAgentLoop.__new__(PalaestraAgentLoop)  # verl's __init__ needs a cluster config
    loop.server_manager = AlwaysOne(tokenizer)
    loop.tokenizer = tokenizer
    loop.rollout_config = SimpleNamespace(
        response_length=4096, multi_turn=SimpleNamespace(max_assistant_turns=2)
    )
    row = task_rows(ENV_ID, [0])[0]
    output = asyncio.run(loop.run({}, **row))
    assert isinstance(output, AgentLoopOutput)
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    assert output.reward_score == 0.0 and sum(output.response_mask) == 2 * len(
        loop.server_manager.ids
    )
