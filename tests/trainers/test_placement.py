"""Where the policy trains (``model.device``) and gradient checkpointing; a GPU run when present."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from pydantic import ValidationError  # noqa: E402

from palaestra.agents.devices import resolve_device  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.batch import build_batch  # noqa: E402
from palaestra.trainers.config import ModelConfig, TrainerConfig  # noqa: E402
from palaestra.trainers.placement import (  # noqa: E402
    enable_gradient_checkpointing,
    uses_gradient_checkpointing,
)
from palaestra.trainers.trainer import Trainer  # noqa: E402
from palaestra.trainers.update import PolicyUpdater  # noqa: E402
from tests.trainers.letter_env import ENV_ID  # noqa: E402
from tests.trainers.tiny_model import on_policy_episodes, tiny_qwen2  # noqa: E402

pytestmark = pytest.mark.usefixtures("letter_env")


def _config(tmp_path: Path, **model) -> TrainerConfig:
    return TrainerConfig(
        steps=2,
        output_dir=str(tmp_path / "run"),
        model=model,
        rollout={"env_id": ENV_ID, "group_size": 4, "groups_per_step": 2, "max_new_tokens": 3},
        advantage={"estimator": "grpo"},
        optim={"lr": 1e-2},
        log={"console": False},
    )


@pytest.fixture
def two_gpus(monkeypatch):
    """torch reports two CUDA devices (nothing is moved to them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_auto_is_the_gpu_when_there_is_one(two_gpus):
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")


def test_a_gpu_index_the_machine_lacks_is_named(two_gpus):
    with pytest.raises(ValueError, match=r"model.device is 'cuda:2', but this machine has 2 CUDA"):
        resolve_device("cuda:2", setting="model.device")


def test_auto_is_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_a_device_that_is_not_a_device_name_is_a_config_error():
    with pytest.raises(ValidationError, match=r"model.device must be auto, cpu, cuda or cuda:N"):
        TrainerConfig(model={"device": "gpu"})


def test_an_absent_gpu_fails_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # model.path does not exist: the device error must come first
    config = _config(tmp_path, path=str(tmp_path / "no-model"), device="cuda:0")
    with pytest.raises(ValueError, match=r"model.device is 'cuda:0', but .*set model.device to"):
        Trainer.from_config(config)


def test_the_trainer_refuses_an_absent_gpu_for_a_given_model(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = tiny.tiny_qwen2(len(tokenizer))
    with pytest.raises(ValueError, match=r"model.device is 'cuda'"):
        Trainer(_config(tmp_path, device="cuda"), model, tokenizer)


def test_policy_reference_and_engine_share_the_configured_device(tmp_path, tokenizer):
    model = tiny.tiny_qwen2(len(tokenizer))
    ref = copy.deepcopy(model)
    trainer = Trainer(_config(tmp_path, device="cpu"), model, tokenizer, ref_model=ref)
    assert trainer.device == torch.device("cpu")
    for module in (trainer.model, ref, trainer.engine.agent.model):
        assert {p.device for p in module.parameters()} == {torch.device("cpu")}
    assert trainer.engine.agent.device == torch.device("cpu")


def _recording_moves(module, moves: list) -> None:
    """Make ``module.to(device)`` record the device instead of moving (no GPU here)."""

    def to(device, *args, **kwargs):
        moves.append(torch.device(device))
        return module

    module.to = to


def test_auto_places_policy_reference_and_engine_on_the_gpu(tmp_path, tokenizer, two_gpus):
    from palaestra.agents.simple import RandomAgent

    gpu = torch.device("cuda", 0)
    model, ref = tiny.tiny_qwen2(len(tokenizer)), tiny.tiny_qwen2(len(tokenizer))
    policy_moves, ref_moves = [], []
    _recording_moves(model, policy_moves)
    _recording_moves(ref, ref_moves)
    engine = SimpleNamespace(agent=RandomAgent())  # not the HF engine, which moves it too
    trainer = Trainer(_config(tmp_path), model, tokenizer, ref_model=ref, engine=engine)
    assert trainer.device == gpu and policy_moves == [gpu] and ref_moves == [gpu]
    assert _checkpointing(model)  # the default on a GPU

    model = tiny.tiny_qwen2(len(tokenizer))
    _recording_moves(model, [])
    assert Trainer(_config(tmp_path), model, tokenizer).engine.agent.device == gpu


def test_gradient_checkpointing_defaults_to_on_for_a_gpu_only():
    unset, off, on = (
        ModelConfig(),
        ModelConfig(gradient_checkpointing=False),
        ModelConfig(gradient_checkpointing=True),
    )
    gpu, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert uses_gradient_checkpointing(unset, gpu) and not uses_gradient_checkpointing(unset, cpu)
    assert not uses_gradient_checkpointing(off, gpu)
    assert uses_gradient_checkpointing(on, cpu)


def _checkpointing(model) -> bool:
    return any(getattr(m, "gradient_checkpointing", False) for m in model.modules())


def test_the_trainer_turns_checkpointing_on_when_configured(tmp_path, tokenizer):
    on = Trainer(
        _config(tmp_path, device="cpu", gradient_checkpointing=True),
        tiny.tiny_qwen2(len(tokenizer)),
        tokenizer,
    )
    default = Trainer(_config(tmp_path, device="cpu"), tiny.tiny_qwen2(len(tokenizer)), tokenizer)
    assert _checkpointing(on.model) and not _checkpointing(default.model)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_a_checkpointed_update_equals_a_plain_one(lora: bool):
    """Same weights after a step with and without checkpointing (also when only LoRA
    adapters train, whose layer inputs do not require grad)."""
    model = tiny_qwen2()
    if lora:
        pytest.importorskip("peft", reason="LoRA needs peft (extra 'train')")
        from palaestra.trainers.config import LoraConfig
        from palaestra.trainers.lora import apply_lora

        model = apply_lora(model, LoraConfig(r=4))
    models = [model, copy.deepcopy(model)]
    enable_gradient_checkpointing(models[1])
    assert _checkpointing(models[1]) and not _checkpointing(models[0])
    batch = build_batch(on_policy_episodes(models[0], [2, 2]), [[1.0, 1.0], [-1.0, -1.0]])
    config = TrainerConfig(optim={"lr": 1e-2}, update={"micro_batch_size": 1})
    before = [p.detach().clone() for p in models[0].parameters() if p.requires_grad]
    for model in models:
        PolicyUpdater(model, config).step(batch)
    plain, checkpointed = ([p for p in model.parameters() if p.requires_grad] for model in models)
    assert any(not torch.equal(a, b) for a, b in zip(before, plain, strict=True))
    for a, b in zip(plain, checkpointed, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")
def test_training_on_the_gpu_moves_the_weights_and_keeps_them_finite(tmp_path, tokenizer):
    model = tiny.tiny_qwen2(len(tokenizer))
    before = [p.detach().clone() for p in model.parameters()]
    trainer = Trainer(_config(tmp_path), model, tokenizer)  # model.device: auto
    assert trainer.device.type == "cuda" and trainer.engine.agent.device.type == "cuda"
    assert _checkpointing(trainer.model)  # the default on a GPU
    history = trainer.train()
    assert len(history) == 2 and all(r["skipped_updates"] == 0 for r in history)
    after = list(trainer.model.parameters())
    assert all(p.device.type == "cuda" and torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b.cpu()) for a, b in zip(before, after, strict=True))
