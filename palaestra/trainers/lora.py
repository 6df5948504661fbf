"""LoRA adapters via ``peft`` (the ``model.lora`` section of the trainer config)."""

from __future__ import annotations

from torch import nn

from palaestra.trainers.config import LoraConfig


def apply_lora(model: nn.Module, config: LoraConfig) -> nn.Module:
    """Wrap a causal LM with LoRA adapters; afterwards only the adapter weights are trainable.

    ``W x`` becomes ``W x + (alpha / r) B A x`` on each module named in
    ``config.target_modules``, with ``B`` initialized to 0 (the wrapped model starts out
    computing exactly what the original did).
    """
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "LoRA needs peft; install it with `pip install palaestra[train]`"
        ) from error
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    unknown = sorted(set(config.target_modules) - present)
    if unknown:
        raise ValueError(
            f"LoRA target modules {unknown} are not in the model; it has e.g. "
            f"{sorted(n for n in present if n.endswith('proj'))[:8]}"
        )
    peft_config = PeftLoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_config)
