"""OpenRLHF's agent executor over palaestra envs, run by OpenRLHF's own code (installed with
--no-deps).

OpenRLHF's loader reads the agent file (``examples/openrlhf_agent.py``) and checks the class
subclasses ``AgentExecutorBase``; its rollout actor's ``generate_responses`` calls
``execute`` with OpenRLHF's keyword arguments (``images=`` included) and its own ``generate``
as the engine; ``SamplesGenerator._process_response_into_experience`` turns the result
into the ``Experience`` OpenRLHF trains on (cutting anything past ``max_len``). Only vLLM is
a stand-in: an ``AsyncLLMEngine`` that streams ``RequestOutput``-shaped answers and honours
``max_tokens``, and ``SamplingParams`` with the fields OpenRLHF sets.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from palaestra.runner.tokens import ChatTokenizer
from tests.integrations.frameworks import OPENRLHF_MISSING_OK, import_framework

pytest.importorskip("torch", reason="OpenRLHF's experiences are tensors")
pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")
agent, vllm_engine, samples_generator, adapter = import_framework(
    "openrlhf",
    OPENRLHF_MISSING_OK,
    [
        "openrlhf.utils.agent",
        "openrlhf.trainer.ray.vllm_engine",
        "openrlhf.trainer.ppo_utils.samples_generator",
        "palaestra.integrations.openrlhf",
    ],
)

ENV_ID = "game:GuessTheNumber-v0"
AGENT_FILE = Path(__file__).parents[2] / "examples" / "openrlhf_agent.py"


@dataclass
class SamplingParams:
    """The fields of vLLM's SamplingParams that OpenRLHF sets."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = None
    min_tokens: int = 1
    skip_special_tokens: bool = False
    logprobs: int | None = 1


class GuessEngine:
    """vLLM's AsyncLLMEngine as OpenRLHF's actor drives it: always ``\\boxed{guess}`` padded
    with ``filler`` words, logprob -0.25 per token, cut at ``max_tokens``."""

    def __init__(self, tokenizer, guess: int = 1, filler: int = 0):
        self.text = rf"\boxed{{{guess}}}" + " hmm" * filler
        self.ids = tokenizer.encode(self.text + "<|im_end|>")
        self.tokenizer = tokenizer
        self.requests: list[tuple[int, SamplingParams]] = []

    async def generate(self, prompt, sampling_params, request_id):
        self.requests.append((len(prompt["prompt_token_ids"]), sampling_params))
        ids = self.ids[: sampling_params.max_tokens]
        output = SimpleNamespace(
            token_ids=ids,
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            logprobs=[{token: SimpleNamespace(logprob=-0.25)} for token in ids],
            finish_reason="stop" if len(ids) == len(self.ids) else "length",
        )
        yield SimpleNamespace(outputs=[output])


@pytest.fixture(scope="module")
def tokenizer():
    from palaestra.trainers import tiny

    return tiny.train_tokenizer(["I am thinking of an integer between 1 and 50."], vocab_size=300)


def _actor(engine):
    """OpenRLHF's rollout actor around ``engine``, with the executor its loader builds."""
    actor = vllm_engine.RolloutRayActor.__new__(vllm_engine.RolloutRayActor)
    actor.executor = vllm_engine._load_agent_executor(str(AGENT_FILE))
    actor.llm, actor._mm_pad_token_ids = engine, None
    return actor


def _generate(tokenizer, engine, *, max_length=4096, label=None, samples=1, **params):
    row = adapter.task_rows(ENV_ID, [0])[0]
    responses = asyncio.run(
        _actor(engine).generate_responses(
            prompt="<the chat-templated prompt>",
            label=label or row["label"],
            sampling_params=SamplingParams(**params),
            max_length=max_length,
            hf_tokenizer=tokenizer,
            num_samples=samples,
            images=None,
        )
    )
    return row, responses


def _experience(response, max_len):
    generator = samples_generator.SamplesGenerator.__new__(samples_generator.SamplesGenerator)
    return generator._process_response_into_experience(response, max_len=max_len)


def test_openrlhf_loads_the_agent_file():
    executor = vllm_engine._load_agent_executor(str(AGENT_FILE))
    assert isinstance(executor, adapter.AgentExecutor)
    assert isinstance(executor, agent.AgentExecutorBase)


def test_labels_name_the_task():
    row = adapter.task_rows(ENV_ID, [9], env_kwargs={"max_number": 20})[0]
    assert json.loads(row["label"])["env_kwargs"] == '{"max_number": 20}'
    assert adapter.task_from_label(row["label"]).env_kwargs == {"max_number": 20}
    with pytest.raises(ValueError, match="task_rows"):
        adapter.task_from_label("42")


def test_generate_responses_gets_the_token_exact_sequence(tokenizer):
    engine = GuessEngine(tokenizer)
    row, responses = _generate(tokenizer, engine, samples=2)
    result = responses[0]
    assert len(responses) == 2 and result["truncated"] is False and result["images"] is None
    tokens, ranges = result["observation_tokens"], result["action_ranges"]
    prompt = ChatTokenizer(tokenizer).prompt_ids(row["prompt"])
    assert tokens[: len(prompt)] == prompt and ranges[0][0] == len(prompt)
    assert len(ranges) == 10 and all(tokens[a:b] == engine.ids for a, b in ranges)
    assert "too low" in tokenizer.decode(tokens[ranges[0][1] : ranges[1][0]])
    logprobs = result["rollout_log_probs"]
    assert [logprobs[i] for a, b in ranges for i in range(a, b)] == [-0.25] * (10 * len(engine.ids))
    assert result["reward"] == result["scores"] == 0.0
    assert engine.requests[0][1].max_tokens == 4096 - len(prompt)  # what is left of max_length
    experience = _experience(result, 4096)
    assert experience.sequences[0].tolist() == tokens
    assert experience.action_mask[0].sum() == 10 * len(engine.ids)
    assert float(experience.info["turns"][0]) == 10.0


@pytest.mark.parametrize("room", [3, 40, 90, 150])
def test_max_length_ends_the_episode_and_openrlhf_cuts_nothing(tokenizer, room):
    row = adapter.task_rows(ENV_ID, [0])[0]
    budget = len(ChatTokenizer(tokenizer).prompt_ids(row["prompt"])) + room
    engine = GuessEngine(tokenizer, filler=4)
    _, (result,) = _generate(tokenizer, engine, max_length=budget, logprobs=None)
    tokens = result["observation_tokens"]
    assert len(tokens) <= budget and result["truncated"] is True
    assert result["rollout_log_probs"] is None
    experience = _experience(result, budget)
    assert experience.sequences[0].tolist() == tokens  # nothing past max_len to cut
    assert len(result["action_ranges"]) == len(engine.requests)
    assert all(params.max_tokens <= budget - prompt for prompt, params in engine.requests)


def test_the_reward_is_that_of_the_kept_guesses(tokenizer):
    """Seed 0 of 1..2 hides 2: a 1-guesser never scores; a 2-guesser only if its guess fits."""
    label = adapter.task_rows(ENV_ID, [0], env_kwargs={"max_number": 2})[0]["label"]
    prompt = len(
        ChatTokenizer(tokenizer).prompt_ids(
            adapter.task_rows(ENV_ID, [0], env_kwargs={"max_number": 2})[0]["prompt"]
        )
    )
    for guess, room, reward in [(2, 50, 1.0), (2, 3, 0.0), (1, 200, 0.0)]:
        engine = GuessEngine(tokenizer, guess=guess)
        _, (result,) = _generate(tokenizer, engine, max_length=prompt + room, label=label)
        assert result["reward"] == reward and result["extra_logs"]["success"] == reward


def test_sampling_params_pass_through_with_a_per_turn_cap(tokenizer):
    engine = GuessEngine(tokenizer, filler=10)
    _generate(tokenizer, engine, max_tokens=5, top_k=7, temperature=0.6)
    assert {(p.max_tokens, p.top_k, p.temperature) for _, p in engine.requests} == {(5, 7, 0.6)}


def test_images_are_refused_with_the_reason(tokenizer):
    executor = adapter.AgentExecutor()
    row = adapter.task_rows(ENV_ID, [0])[0]
    with pytest.raises(ValueError, match="text-only"):
        asyncio.run(
            executor.execute(
                row["prompt"], row["label"], SamplingParams(), 100, tokenizer, None, images=["x"]
            )
        )
