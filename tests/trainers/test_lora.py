"""LoRA: only adapters train, the wrapped model starts identical, updates go the right way."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="LoRA needs torch (extra 'train')")
pytest.importorskip("peft", reason="LoRA needs peft (extra 'train')")
pytest.importorskip("transformers", reason="the tiny test model needs transformers")

from palaestra.trainers.batch import build_batch  # noqa: E402
from palaestra.trainers.config import LoraConfig, TrainerConfig  # noqa: E402
from palaestra.trainers.lora import apply_lora  # noqa: E402
from palaestra.trainers.update import PolicyUpdater, sequence_logprobs  # noqa: E402
from tests.trainers.tiny_model import (  # noqa: E402
    mean_policy_logp,
    on_policy_episodes,
    tiny_qwen2,
)


def test_lora_trains_only_adapters_and_follows_the_advantage() -> None:
    base = tiny_qwen2()
    episodes = on_policy_episodes(base, [2, 2])
    batch = build_batch(episodes, [[1.0, 1.0], [-1.0, -1.0]])
    with torch.no_grad():
        before, _ = sequence_logprobs(base, batch.input_ids, batch.attention_mask)
    frozen = {name: p.detach().clone() for name, p in base.named_parameters()}

    model = apply_lora(base, LoraConfig(r=4, alpha=8))
    with torch.no_grad():
        wrapped, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
    torch.testing.assert_close(wrapped, before)  # B = 0: same function at the start

    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)

    good, bad = mean_policy_logp(model, batch, [0]), mean_policy_logp(model, batch, [1])
    updater = PolicyUpdater(model, TrainerConfig(optim={"lr": 1e-2}))
    for _ in range(3):
        updater.step(batch)
    assert mean_policy_logp(model, batch, [0]) > good + 0.05
    assert mean_policy_logp(model, batch, [1]) < bad - 0.05
    for name, p in model.base_model.model.named_parameters():
        if "lora_" not in name:
            original = name.replace(".base_layer", "")
            torch.testing.assert_close(p, frozen[original], atol=0, rtol=0)


def test_unknown_target_modules_are_named() -> None:
    with pytest.raises(ValueError, match=r"\['query'\] are not in the model"):
        apply_lora(tiny_qwen2(), LoraConfig(target_modules=["q_proj", "query"]))
