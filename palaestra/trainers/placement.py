"""Where the policy trains: the device of ``model.device`` and gradient checkpointing.

``model.device`` is ``auto`` (the GPU when there is one), ``cpu``, ``cuda`` or ``cuda:N``;
the policy, the reference model and the HF rollout engine (which samples with the policy's
own module or a copy of it) all run there. A device this machine does not have is an error.

Gradient checkpointing (``model.gradient_checkpointing``; by default on when the device is
a GPU, as in TRL) keeps only each decoder layer's input during the update's forward pass and
recomputes the rest in the backward pass: activation memory falls from every layer's
intermediate tensors to one layer's, for about one more forward pass of compute (the update
takes roughly a third longer). Rollouts are not affected: generation runs in eval mode,
where checkpointing is off.

>>> place_models(ModelConfig(device="cpu"), model)  # doctest: +SKIP
device(type='cpu')
"""

from __future__ import annotations

from typing import Any

from torch import nn

from palaestra.agents.devices import resolve_device
from palaestra.trainers.config import ModelConfig


def training_device(config: ModelConfig) -> Any:
    """The ``torch.device`` that ``model.device`` names on this machine (checked)."""
    return resolve_device(config.device, setting="model.device")


def place_models(config: ModelConfig, model: nn.Module, ref_model: nn.Module | None = None) -> Any:
    """Move ``model`` (and ``ref_model``) to ``model.device``, turn gradient checkpointing on
    where the config asks for it (by default: on a GPU) and return the device."""
    device = training_device(config)
    model.to(device)
    if ref_model is not None:
        ref_model.to(device)
    if uses_gradient_checkpointing(config, device):
        enable_gradient_checkpointing(model)
    return device


def uses_gradient_checkpointing(config: ModelConfig, device: Any) -> bool:
    """``model.gradient_checkpointing``, or when it is null whether ``device`` is a GPU."""
    if config.gradient_checkpointing is not None:
        return config.gradient_checkpointing
    return device.type == "cuda"


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Checkpoint every decoder layer of a transformers model (LoRA-wrapped or not), with
    PyTorch's non-reentrant checkpointing."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    elif hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise ValueError(
            f"{type(model).__name__} has no gradient checkpointing; set "
            "model.gradient_checkpointing: false"
        )
