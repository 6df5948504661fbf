"""Where a torch model runs: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, checked against the machine.

>>> resolve_device("cpu")
device(type='cpu')
"""

from __future__ import annotations

import re
from typing import Any

DEVICE_PATTERN = r"auto|cpu|cuda(:\d+)?"
"""The device names accepted: ``auto`` (the GPU when there is one), ``cpu``, ``cuda[:N]``."""


def resolve_device(name: str, *, setting: str = "device") -> Any:
    """The ``torch.device`` that ``name`` stands for on this machine.

    ``auto`` is the current CUDA device when torch sees one, else the CPU. A CUDA device that
    is absent is an error naming ``setting`` (the option the user set) and what exists.
    """
    import torch

    if not re.fullmatch(DEVICE_PATTERN, name):
        raise ValueError(f"{setting} {name!r} is not a device; use auto, cpu, cuda or cuda:N")
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if name == "auto":
        return (
            torch.device("cuda", torch.cuda.current_device()) if available else torch.device("cpu")
        )
    if name == "cpu":
        return torch.device("cpu")
    index = int(name.partition(":")[2] or 0)
    if index >= available:
        raise ValueError(f"{setting} is {name!r}, but {_cuda_devices(available)}; {_fix(setting)}")
    return torch.device("cuda", index)


def _cuda_devices(count: int) -> str:
    import torch

    if count:
        return f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    return "torch sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides it)"


def _fix(setting: str) -> str:
    return f"set {setting} to auto (the GPU when there is one), cpu, or a cuda:N that exists"
