"""Checkpoints for exact resume: model, optimizer, scheduler, RNG states, step, data position.

A checkpoint is a directory holding ``model.pt`` (the trainable model's state dict),
``trainer.pt`` (updater state and every RNG state) and ``meta.json`` (step, data position and
anything else JSON-serializable, readable without torch).

>>> save_checkpoint("runs/x/step-10", model, updater, step=10, data_position={"seed": 80})
...                                                          # doctest: +SKIP
>>> meta = load_checkpoint("runs/x/step-10", model, updater)  # doctest: +SKIP
>>> meta["step"], meta["data_position"]                       # doctest: +SKIP
(10, {'seed': 80})
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from palaestra.trainers.update import PolicyUpdater

MODEL_FILE, TRAINER_FILE, META_FILE = "model.pt", "trainer.pt", "meta.json"


def save_checkpoint(
    directory: str | Path,
    model: nn.Module,
    updater: PolicyUpdater,
    *,
    step: int,
    data_position: Any = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint to ``directory`` (created if needed) and return its path.

    Also saves the global RNG states of ``random``, numpy and torch (CPU and CUDA), so code that
    samples from them continues identically after :func:`load_checkpoint`. The files are
    written into a hidden sibling directory that is renamed into place at the end, so a run
    killed mid-save (Ctrl-C) leaves its previous checkpoint as the latest, never a half one.
    """
    path = Path(directory)
    partial = path.with_name(f".{path.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    torch.save(model.state_dict(), partial / MODEL_FILE)
    torch.save({"updater": updater.state_dict(), "rng": _rng_state()}, partial / TRAINER_FILE)
    meta = {"step": step, "data_position": data_position, **(extra or {})}
    (partial / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
    return path


def load_checkpoint(directory: str | Path, model: nn.Module, updater: PolicyUpdater) -> dict:
    """Restore ``model``, ``updater`` and the global RNG states; returns the metadata dict."""
    path = Path(directory)
    missing = [name for name in (MODEL_FILE, TRAINER_FILE, META_FILE) if not (path / name).exists()]
    if missing:
        raise FileNotFoundError(f"{path} is not a complete checkpoint: missing {missing}")
    model.load_state_dict(torch.load(path / MODEL_FILE, map_location=updater.device))
    state = torch.load(path / TRAINER_FILE, map_location="cpu", weights_only=False)
    updater.load_state_dict(state["updater"])
    _set_rng_state(state["rng"])
    return json.loads((path / META_FILE).read_text(encoding="utf-8"))


def _rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
