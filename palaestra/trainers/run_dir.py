"""A run directory holds one run. A fresh run refuses a directory an earlier run wrote to
(its checkpoints and ``metrics.jsonl`` would mix with the new ones) unless asked to clear it,
and a resume knows the step it starts from before any model loads.

Readable without torch: checkpoints' ``meta.json`` is plain JSON.

>>> describe_run("runs/quickstart")  # doctest: +SKIP
'checkpoints up to step 40, metrics.jsonl, a final model'
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CHECKPOINT_DIR = "checkpoints"
FINAL_MODEL_DIR = "final"
METRICS_FILE = "metrics.jsonl"
RUN_OUTPUTS = (CHECKPOINT_DIR, FINAL_MODEL_DIR, METRICS_FILE, "tensorboard")
"""What a run writes into its directory (``clear_run`` removes these and nothing else, so a
model or data the config points at inside the directory stays)."""


class RunDirInUse(FileExistsError):
    """The output directory already holds another run's outputs."""


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint of the highest step under ``output_dir/checkpoints``, if any."""
    directory = Path(output_dir) / CHECKPOINT_DIR
    steps = sorted(directory.glob("step-*")) if directory.is_dir() else []
    return steps[-1] if steps else None


def checkpoint_step(checkpoint: str | Path) -> int:
    """The step a checkpoint was saved at (from its ``meta.json``)."""
    meta = Path(checkpoint) / "meta.json"
    try:
        return int(json.loads(meta.read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{checkpoint} is not a complete checkpoint ({error})") from error


def describe_run(output_dir: str | Path) -> str | None:
    """What an earlier run left in ``output_dir``; None when it holds no run."""
    directory = Path(output_dir)
    found = []
    checkpoint = latest_checkpoint(directory)
    if checkpoint is not None:
        found.append(f"checkpoints up to {checkpoint.name}")
    metrics = directory / METRICS_FILE
    if metrics.is_file() and metrics.stat().st_size > 0:
        found.append(METRICS_FILE)
    if (directory / FINAL_MODEL_DIR).exists():
        found.append("a final model")
    return ", ".join(found) or None


def refuse_used_run_dir(output_dir: str | Path) -> None:
    """Raise :class:`RunDirInUse` when ``output_dir`` holds an earlier run."""
    found = describe_run(output_dir)
    if found is not None:
        raise RunDirInUse(
            f"{output_dir} already holds a run ({found}): continue it with --resume "
            "(Trainer.resume()), start over in it with --overwrite (clear_run()), or give "
            "another --output-dir"
        )


def clear_run(output_dir: str | Path) -> None:
    """Remove an earlier run's outputs (checkpoints, final model, metrics, TensorBoard logs)."""
    directory = Path(output_dir)
    for name in RUN_OUTPUTS:
        path = directory / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
