"""The ``palaestra train`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

PRESETS = ("cpu-demo",)


def train_command(
    config: Annotated[
        Path | None, typer.Argument(help="Trainer config (YAML); see docs/trainers.md.")
    ] = None,
    preset: Annotated[
        str | None, typer.Option(help=f"A built-in run instead of a config: {', '.join(PRESETS)}.")
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", "-o", help="Where metrics, checkpoints and the model go."),
    ] = None,
    steps: Annotated[int | None, typer.Option(help="Override the number of RL steps.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the seed.")] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue from the latest checkpoint in the output dir."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-step lines.")] = False,
) -> None:
    """Train a policy with turn-level RL: from a YAML config, or a preset such as cpu-demo."""
    console = Console()
    if (config is None) == (preset is None):
        console.print("[red]error:[/red] give a CONFIG file or --preset (one of them)")
        raise typer.Exit(2)
    if preset is not None:
        if preset not in PRESETS:
            console.print(f"[red]error:[/red] unknown preset {preset!r}; choose one of {PRESETS}")
            raise typer.Exit(2)
        if resume:
            console.print("[red]error:[/red] the cpu-demo starts from scratch; drop --resume")
            raise typer.Exit(2)
        from palaestra.trainers.demo import run_cpu_demo

        run_cpu_demo(
            output_dir or Path("runs/cpu-demo"),
            seed=seed or 0,
            **({"steps": steps} if steps else {}),
            console=console,
        )
        return
    _train_from_config(config, output_dir, steps, seed, resume=resume, quiet=quiet, console=console)


def _train_from_config(
    path: Path,
    output_dir: Path | None,
    steps: int | None,
    seed: int | None,
    *,
    resume: bool,
    quiet: bool,
    console: Console,
) -> None:
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.trainer import Trainer

    try:
        config = TrainerConfig.from_yaml(path)
    except (OSError, ValueError) as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    overrides = {"output_dir": str(output_dir), "steps": steps, "seed": seed}
    data = config.model_dump() | {k: v for k, v in overrides.items() if v is not None}
    if quiet:
        data["log"] = {**data["log"], "console": False}
    config = TrainerConfig.model_validate(data)
    with Trainer.from_config(config, console=console) as trainer:
        if resume:
            console.print(f"resumed at step {trainer.resume()}")
        history = trainer.train()
    if history:
        last = history[-1]
        console.print(
            f"done: {trainer.step} steps, last reward {last.get('reward', float('nan')):.3f}; "
            f"metrics in {Path(config.output_dir) / 'metrics.jsonl'}"
        )


def register_cli(app: typer.Typer) -> None:
    """Add ``train`` to the ``palaestra`` command."""
    app.command("train")(train_command)
