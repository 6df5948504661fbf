"""verl's agent loop over palaestra envs, run by verl's own code (verl installed with --no-deps).

Rows go to a Parquet file, verl's ``RLHFDataset`` reads them back, and verl's
``AgentLoopWorker._run_agent_loop`` (the per-sample path of ``generate_sequences``) builds
the registered loop from verl's registry, awaits ``run`` and pads the output to
``prompt_length``/``response_length``. Only the LLM server is a stand-in: it answers as
verl's ``LLMServerClient.generate`` does (a ``TokenOutput``) and honours ``max_tokens``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from palaestra.integrations.export import write_rows
from tests.integrations.frameworks import VERL_MISSING_OK, import_framework

pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")
pytest.importorskip("pyarrow", reason="Parquet needs the 'datasets' extra")
agent_loop, rl_dataset, replica, verl = import_framework(
    "verl",
    VERL_MISSING_OK,
    [
        "verl.experimental.agent_loop.agent_loop",
        "verl.utils.dataset.rl_dataset",
        "verl.workers.rollout.replica",
        "palaestra.integrations.verl",
    ],
)
OmegaConf = agent_loop.OmegaConf

ENV_ID = "game:GuessTheNumber-v0"


@pytest.fixture(scope="module")
def tokenizer():
    from palaestra.trainers import tiny

    return tiny.train_tokenizer(["I am thinking of an integer between 1 and 50."], vocab_size=300)


class GuessServer:
    """verl's LLM server as the loop sees it: its n-th answer is ``\\boxed{guesses[n]}``
    (the last one repeated, padded with ``filler`` words), logprob -0.25 per token, at most
    ``max_tokens`` tokens."""

    def __init__(self, tokenizer, guesses=(1,), filler: int = 0):
        self.answers = [
            tokenizer.encode(rf"\boxed{{{guess}}}" + " hmm" * filler + "<|im_end|>")
            for guess in guesses
        ]
        self.ids = self.answers[0]
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append({"request_id": request_id, "prompt": len(prompt_ids), **sampling_params})
        answer = self.answers[min(len(self.calls), len(self.answers)) - 1]
        ids = answer[: sampling_params.get("max_tokens", len(answer))]
        return replica.TokenOutput(
            token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed"
        )


def _config(response_length=256, assistant_turns=None, user_turns=None, template_kwargs=None):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 512,
                    "response_length": response_length,
                    "multi_turn": {
                        "max_assistant_turns": assistant_turns,
                        "max_user_turns": user_turns,
                    },
                }
            },
            "data": {
                "apply_chat_template_kwargs": template_kwargs or {},
                "filter_overlong_prompts_workers": 1,
                "max_prompt_length": 512,
            },
        }
    )


def _worker(config, server, tokenizer):
    """verl's AgentLoopWorker with what its __init__ sets for ``_run_agent_loop``."""
    worker = agent_loop.AgentLoopWorker.__new__(agent_loop.AgentLoopWorker)
    worker.config, worker.llm_client, worker.tokenizer = config, server, tokenizer
    worker.processor, worker.hf_model_type, worker.tools = None, None, []
    worker.dataset_cls, worker.rollout_config = (
        rl_dataset.RLHFDataset,
        config.actor_rollout_ref.rollout,
    )
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    worker.mm_processor_kwargs = {}
    return worker


def _dataset(tmp_path, tokenizer, config, rows):
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "train.parquet"
    write_rows(rows, path)
    return rl_dataset.RLHFDataset(
        str(path),
        tokenizer,
        OmegaConf.merge(config.data, {"cache_dir": str(tmp_path / "cache")}),
    )


def _run(worker, row) -> object:
    """One sample through ``_run_agent_loop`` as ``generate_sequences`` calls it."""
    kwargs = {k: v for k, v in row.items() if k != "dummy_tensor"}  # the non-tensor fields
    trajectory = {"step": 0, "sample_index": 0, "rollout_n": 0, "validate": False}
    params = {
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 5,
        "repetition_penalty": 1.0,
        "logprobs": True,
    }
    return asyncio.run(worker._run_agent_loop(params, trajectory, trace=False, **kwargs))


def _unpadded(output):
    mask = output.response_mask[0].tolist()
    length = int(output.attention_mask[0, -output.response_ids.shape[1] :].sum())
    return output.response_ids[0, :length].tolist(), mask[:length]


def test_registered_and_selected_by_rows():
    assert agent_loop._agent_loop_registry["palaestra"]["_target_"].endswith("PalaestraAgentLoop")
    row = verl.task_rows(ENV_ID, [7])[0]
    assert row["agent_name"] == "palaestra" and row["extra_info"]["seed"] == 7


def test_worker_plays_rows_of_a_parquet_file_mixing_envs(tmp_path, tokenizer):
    rows = verl.task_rows(ENV_ID, [0], env_kwargs={"max_number": 4})
    rows += verl.task_rows("game:Wordle-v0", [0])  # other kwargs: Parquet would merge the structs
    config = _config(assistant_turns=3)
    dataset = _dataset(tmp_path, tokenizer, config, rows)
    server = GuessServer(tokenizer)
    worker = _worker(config, server, tokenizer)
    outputs = [_run(worker, dataset[i]) for i in range(len(dataset))]
    assert [o.extra_fields["truncation_reason"] for o in outputs] == ["runner_max_turns"] * 2
    guess = outputs[0]
    response, mask = _unpadded(guess)
    assert guess.response_ids.shape[1] == 256 and guess.prompt_ids.shape[1] == 512
    assert sum(mask) == 3 * len(server.ids) and 0 in mask
    assert "too low" in tokenizer.decode([t for t, m in zip(response, mask, strict=True) if not m])
    assert guess.reward_score == 0.0 and guess.num_turns == 6
    first = server.calls[0]
    assert (first["top_p"], first["top_k"], first["max_tokens"]) == (0.9, 5, 256)
    assert len({call["request_id"] for call in server.calls[:3]}) == 1  # one session per episode


@pytest.mark.parametrize("response_length", [5, 30, 60])
def test_response_length_ends_the_episode_and_the_reward_is_what_is_kept(
    tmp_path, tokenizer, response_length
):
    config = _config(response_length=response_length)
    dataset = _dataset(tmp_path, tokenizer, config, verl.task_rows(ENV_ID, [0]))
    server = GuessServer(tokenizer, filler=3)
    output = _run(_worker(config, server, tokenizer), dataset[0])
    response, mask = _unpadded(output)
    assert output.response_ids.shape[1] == response_length  # verl padded, nothing overflowed
    assert output.extra_fields["truncation_reason"] == "token_budget"
    kept_guesses = tokenizer.decode([t for t, m in zip(response, mask, strict=True) if m]).count(
        "boxed{1}"
    )
    assert output.num_turns == 2 * len(server.calls) and kept_guesses <= len(server.calls)
    assert output.reward_score == 0.0  # 1 is never the secret of seed 0


def test_the_reward_is_that_of_the_kept_guesses(tmp_path, tokenizer):
    """Guess 1 (wrong), then 2 (the secret of seed 0 in 1..2): with room for one guess the
    episode ends unrewarded; it used to be played to the win and then cut."""
    rows = verl.task_rows(ENV_ID, [0], env_kwargs={"max_number": 2})
    server = GuessServer(tokenizer, guesses=(1, 2))
    one_guess = len(server.ids) + 1
    for response_length, reward in [(one_guess, 0.0), (200, 1.0)]:
        server = GuessServer(tokenizer, guesses=(1, 2))
        config = _config(response_length=response_length)
        dataset = _dataset(tmp_path / str(response_length), tokenizer, config, rows)
        output = _run(_worker(config, server, tokenizer), dataset[0])
        assert output.reward_score == reward and output.extra_fields["success"] == bool(reward)
        assert output.num_turns == 2 * len(server.calls) == 2 * (1 + int(reward))


def test_chat_template_kwargs_reach_the_template(tmp_path, tokenizer):
    from palaestra.trainers import tiny

    thinking = tiny.train_tokenizer(["I am thinking of an integer."], vocab_size=300)
    thinking.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}"
    )
    config = _config(assistant_turns=1, template_kwargs={"enable_thinking": False})
    dataset = _dataset(tmp_path, thinking, config, verl.task_rows(ENV_ID, [0]))
    server = GuessServer(thinking)
    output = _run(_worker(config, server, thinking), dataset[0])
    prompt = output.prompt_ids[0][output.attention_mask[0, :512].bool()].tolist()
    assert thinking.decode(prompt).endswith("<|im_start|>assistant\n<think></think>")


def test_the_loop_reads_only_what_verl_set_in_january_2026(tokenizer):
    """verl's January 2026 AgentLoopBase had no ``rollout_config`` attribute."""
    config = _config(assistant_turns=2)
    loop = agent_loop._agent_loop_registry["palaestra"]
    instance = _worker(config, GuessServer(tokenizer), tokenizer)
    built = agent_loop.hydra.utils.instantiate(
        loop,
        trainer_config=agent_loop.DictConfigWrap(config=config),
        server_manager=instance.llm_client,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=rl_dataset.RLHFDataset,
        data_config=agent_loop.DictConfigWrap(config.data),
    )
    del built.rollout_config
    row = verl.task_rows(ENV_ID, [0])[0]
    output = asyncio.run(built.run({}, **row))
    assert isinstance(output, agent_loop.AgentLoopOutput) and output.num_turns == 4


def test_runner_settings_from_verl_config():
    rollout = SimpleNamespace(
        response_length=100, multi_turn=SimpleNamespace(max_assistant_turns=5, max_user_turns=2)
    )
    assert verl.runner_settings(rollout, {"enable_thinking": False}) == {
        "max_response_tokens": 100,
        "max_turns": 3,
        "template_kwargs": {"enable_thinking": False},
    }
