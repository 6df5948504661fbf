"""Where the trainer's metrics go: ``metrics.jsonl`` always, a rich console line, and
TensorBoard or W&B when the config asks for them (each only if its package is installed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from palaestra.trainers.config import LogConfig

CONSOLE_KEYS = (
    ("reward", "reward {:.3f}"),
    ("success", "success {:.2f}"),
    ("eval/reward", "[cyan]eval {:.3f}[/cyan]"),
    ("eval/errors", "[red]eval errors {:.0f}[/red]"),
    ("entropy", "entropy {:.2f}"),
    ("approx_kl_rollout", "kl {:.4f}"),
    ("clip_fraction", "clip {:.3f}"),
    ("grad_norm", "gnorm {:.2f}"),
    ("frac_zero_advantage", "zero-adv {:.2f}"),
    ("errors", "errors {:.0f}"),
    ("staleness", "stale {:.1f}"),
    ("rollout_time", "rollout {:.1f}s"),
    ("update_time", "update {:.1f}s"),
)


class MetricsLogger:
    """Writes one record per step; ``resume_from=k`` drops records of steps after ``k`` (work a
    resumed run redoes) from an existing ``metrics.jsonl``. The console line of a step is one
    line whatever the terminal (``step 3/40 ... ~2m left``), so logs can be grepped.

    >>> log = MetricsLogger("runs/x", LogConfig())  # doctest: +SKIP
    >>> log.write(1, {"reward": 0.5})                # doctest: +SKIP
    """

    def __init__(
        self,
        output_dir: str | Path,
        config: LogConfig,
        *,
        run_config: dict[str, Any] | None = None,
        resume_from: int | None = None,
        total_steps: int | None = None,
        console: Console | None = None,
    ) -> None:
        self.path = Path(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console or Console()
        self.show = config.console
        self.total_steps = total_steps
        self._first_step = resume_from or 0
        self._started = time.monotonic()
        if resume_from is None:
            self.path.write_text("", encoding="utf-8")
        else:
            _truncate_after(self.path, resume_from)
        self._tensorboard = _tensorboard_writer(self.path.parent) if config.tensorboard else None
        self._wandb = (
            _wandb_run(config.wandb_project, self.path.parent, run_config)
            if config.wandb_project
            else None
        )

    def write(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` of ``step`` in every sink."""
        record = {"step": step, **metrics}
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
        if self._tensorboard is not None:
            for key, value in metrics.items():
                self._tensorboard.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)
        if self.show:
            self.console.print(self.step_line(step, metrics), soft_wrap=True)

    def step_line(self, step: int, metrics: dict[str, float]) -> str:
        """``step 3/40  reward 0.250  ...  ~2m left``: the step's console line (rich markup)."""
        parts = [fmt.format(metrics[key]) for key, fmt in CONSOLE_KEYS if key in metrics]
        if self.total_steps is None:
            return f"[bold]step {step:>4}[/bold]  " + "  ".join(parts)
        width = len(str(self.total_steps))
        done = step - self._first_step
        if done > 0 and step < self.total_steps:
            per_step = (time.monotonic() - self._started) / done
            parts.append(f"~{_duration(per_step * (self.total_steps - step))} left")
        return f"[bold]step {step:>{width}}/{self.total_steps}[/bold]  " + "  ".join(parts)

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()


def _duration(seconds: float) -> str:
    """``45s``, ``12m``, ``3h05m``: a time left at a glance."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours}h{minutes:02d}m"


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """The records of a ``metrics.jsonl`` file, in order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _truncate_after(path: Path, step: int) -> None:
    kept = [r for r in read_metrics(path) if r["step"] <= step] if path.exists() else []
    path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")


def _tensorboard_writer(directory: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise ImportError(
            "log.tensorboard needs the tensorboard package: pip install tensorboard"
        ) from error
    return SummaryWriter(str(directory / "tensorboard"))


def _wandb_run(project: str, directory: Path, run_config: dict[str, Any] | None) -> Any:
    try:
        import wandb
    except ImportError as error:
        raise ImportError("log.wandb_project needs the wandb package: pip install wandb") from error
    return wandb.init(project=project, dir=str(directory), config=run_config)
