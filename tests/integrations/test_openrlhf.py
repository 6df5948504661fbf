"""OpenRLHF's agent executor over palaestra envs, against OpenRLHF's recorded interface.

OpenRLHF does not install without CUDA, so the engine here answers as the vLLM engine
OpenRLHF passes does (``RequestOutput``: ``outputs[0].token_ids/.text/.logprobs``, logprobs
as one ``{token_id: Logprob}`` dict per token), and the result is checked against the keys
OpenRLHF's ``MultiTurnAgentExecutor.execute`` returns.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from types import SimpleNamespace

import pytest

from palaestra.integrations.openrlhf import AgentExecutor, task_from_label, task_rows
from palaestra.runner.tokens import ChatTokenizer

pytest.importorskip("torch", reason="OpenRLHF's scores are tensors")
pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")

ENV_ID = "game:GuessTheNumber-v0"
OPENRLHF_EXECUTE = [
    "prompt",
    "label",
    "sampling_params",
    "max_length",
    "hf_tokenizer",
    "llm_engine",
]
OPENRLHF_RESULT_KEYS = {
    "prompt",
    "label",
    "reward",
    "scores",
    "observation_tokens",
    "action_ranges",
    "rollout_log_probs",
    "extra_logs",
}


@pytest.fixture(scope="module")
def tokenizer():
    from palaestra.trainers import tiny

    return tiny.train_tokenizer(["I am thinking of an integer between 1 and 50."], vocab_size=300)


class AlwaysOne:
    def __init__(self, tokenizer):
        self.ids = tokenizer.encode(r"\boxed{1}<|im_end|>")
        self.max_tokens: list[int] = []

    async def generate(self, prompt_ids, sampling_params):
        self.max_tokens.append(sampling_params.max_tokens)
        logprobs = [{token: SimpleNamespace(logprob=-0.25)} for token in self.ids]
        output = SimpleNamespace(
            token_ids=self.ids, text=r"\boxed{1}", logprobs=logprobs, finish_reason="stop"
        )
        return SimpleNamespace(outputs=[output])


def _execute(tokenizer, engine, *, max_length=4096, logprobs=0, max_turns=3):
    row = task_rows(ENV_ID, [0])[0]
    params = SimpleNamespace(max_tokens=64, logprobs=logprobs)
    executor = AgentExecutor(max_turns=max_turns)
    return row, asyncio.run(
        executor.execute(row["prompt"], row["label"], params, max_length, tokenizer, engine)
    )


def test_interface_matches_openrlhf():
    assert list(inspect.signature(AgentExecutor.execute).parameters)[1:] == OPENRLHF_EXECUTE
    assert inspect.iscoroutinefunction(AgentExecutor.execute)
    AgentExecutor()  # OpenRLHF builds it with no arguments


def test_labels_name_the_task():
    row = task_rows(ENV_ID, [9], env_kwargs={"max_number": 20})[0]
    assert json.loads(row["label"]) == {
        "env_id": ENV_ID,
        "seed": 9,
        "env_kwargs": {"max_number": 20},
    }
    assert task_from_label(row["label"]).env_kwargs == {"max_number": 20}
    with pytest.raises(ValueError, match="task_rows"):
        task_from_label("42")


def test_execute_returns_the_token_exact_sequence(tokenizer):
    engine = AlwaysOne(tokenizer)
    row, result = _execute(tokenizer, engine)
    assert set(result) == OPENRLHF_RESULT_KEYS
    tokens, ranges = result["observation_tokens"], result["action_ranges"]
    prompt = ChatTokenizer(tokenizer).prompt_ids(row["prompt"])
    assert tokens[: len(prompt)] == prompt and ranges[0][0] == len(prompt)
    assert len(ranges) == 3 and all(tokens[a:b] == engine.ids for a, b in ranges)
    between = tokenizer.decode(tokens[ranges[0][1] : ranges[1][0]])
    assert "too low" in between  # the env's feedback, rendered by the chat template
    logprobs = result["rollout_log_probs"]
    assert len(logprobs) == len(tokens)
    assert [logprobs[i] for a, b in ranges for i in range(a, b)] == [-0.25] * (3 * len(engine.ids))
    assert result["reward"] == 0.0 and float(result["scores"]) == 0.0
    assert float(result["extra_logs"]["turns"]) == 3.0
    assert engine.max_tokens[0] == 4096 - len(prompt)  # what is left of max_length


def test_max_length_ends_the_episode_and_logprobs_are_optional(tokenizer):
    row = task_rows(ENV_ID, [0])[0]
    budget = len(ChatTokenizer(tokenizer).prompt_ids(row["prompt"])) + 150
    _, result = _execute(
        tokenizer, AlwaysOne(tokenizer), max_length=budget, logprobs=None, max_turns=None
    )
    starts = [start for start, _ in result["action_ranges"]]
    assert len(result["observation_tokens"]) >= budget > starts[-1] and 1 < len(starts) < 10
    assert result["rollout_log_probs"] is None
