"""Token logprobs in chunks: equal to the model's own logits, without a batch's logits at once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the update step needs torch (extra 'train')")
transformers = pytest.importorskip("transformers", reason="the tiny models need transformers")

from palaestra.trainers import token_logprobs  # noqa: E402
from palaestra.trainers.token_logprobs import (  # noqa: E402
    PLAIN_HEAD_MODEL_TYPES,
    plain_lm_head,
    sequence_logprobs,
)

VOCAB = 96
SMALL = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
}
MOE = {
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
}


def tiny_model(model_type: str, **extra):
    torch.manual_seed(0)
    options = {**SMALL, **(MOE if model_type.endswith("_moe") else {}), **extra}
    config = transformers.AutoConfig.for_model(model_type, **options)
    return transformers.AutoModelForCausalLM.from_config(config).float()


def padded_batch(rows: int = 3, length: int = 12):
    """Random ids, right-padded to ``length`` with rows of different lengths."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (rows, length), generator=generator)
    mask = torch.ones_like(ids)
    for row in range(rows):
        mask[row, length - 3 * row :] = 0
    return ids * mask, mask


def reference(model, ids, mask, temperature: float = 1.0):
    """Logprobs and entropies straight from the model's full logits."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    logp = log_probs.gather(-1, ids[:, 1:, None])[..., 0]
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    present = mask[:, 1:].float()
    zero = logp.new_zeros(len(ids), 1)
    return torch.cat([zero, logp * present], 1), torch.cat([zero, entropy * present], 1)


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 5 positions, so a batch of 3 x 12 tokens takes several."""
    monkeypatch.setattr(token_logprobs, "CHUNK_LOGITS", 5 * VOCAB)


@pytest.mark.parametrize("model_type", sorted(PLAIN_HEAD_MODEL_TYPES))
def test_chunked_logprobs_and_gradients_equal_the_full_logits(model_type, small_chunks):
    model = tiny_model(model_type)
    assert plain_lm_head(model) is not None
    ids, mask = padded_batch()
    logp, entropy = sequence_logprobs(model, ids, mask, temperature=0.7, with_entropy=True)
    (logp.sum() + entropy.sum()).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected_logp, expected_entropy = reference(model, ids, mask, temperature=0.7)
    (expected_logp.sum() + expected_entropy.sum()).backward()
    assert torch.allclose(logp, expected_logp, atol=1e-5)
    assert torch.allclose(entropy, expected_entropy, atol=1e-5)
    for a, p in zip(got, model.parameters(), strict=True):
        assert torch.allclose(a, p.grad, atol=1e-5)


def test_the_head_never_sees_more_than_a_chunk_of_positions(small_chunks):
    model = tiny_model("qwen2")
    seen = []
    model.get_output_embeddings().register_forward_hook(
        lambda module, inputs, output: seen.append(inputs[0].shape)
    )
    ids, mask = padded_batch()
    logp, _ = sequence_logprobs(model, ids, mask)
    logp.sum().backward()  # the backward pass recomputes each chunk's logits
    positions = int(mask[:, 1:].sum())
    assert all(len(shape) == 2 and shape[0] <= 5 for shape in seen)
    assert sum(shape[0] for shape in seen) == 2 * positions  # forward + recompute, no padding


def test_a_model_with_a_transformed_head_uses_its_own_logits(small_chunks):
    # Gemma 2 soft-caps its logits after the head: the head alone would give other logprobs
    model = tiny_model("gemma2", final_logit_softcapping=2.0, sliding_window=8)
    assert plain_lm_head(model) is None
    ids, mask = padded_batch()
    logp, entropy = sequence_logprobs(model, ids, mask, with_entropy=True)
    expected_logp, expected_entropy = reference(model, ids, mask)
    assert torch.allclose(logp, expected_logp, atol=1e-5)
    assert torch.allclose(entropy, expected_entropy, atol=1e-5)


def test_a_lora_wrapped_model_is_split_at_its_head(small_chunks):
    pytest.importorskip("peft", reason="LoRA needs peft (extra 'train')")
    from palaestra.trainers.config import LoraConfig
    from palaestra.trainers.lora import apply_lora

    model = apply_lora(tiny_model("qwen2"), LoraConfig(r=4))
    assert plain_lm_head(model) is not None
    ids, mask = padded_batch()
    logp, _ = sequence_logprobs(model, ids, mask)
    assert torch.allclose(logp, reference(model, ids, mask)[0], atol=1e-5)
