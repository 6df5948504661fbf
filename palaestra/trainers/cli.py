"""The ``palaestra train`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

import palaestra
from palaestra.console import fail

if TYPE_CHECKING:
    from palaestra.trainers.config import TrainerConfig

PRESETS = ("cpu-demo",)
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""``org/name``: a Hugging Face Hub id (a path that does not exist locally may be one)."""


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
        fail(console, "give a CONFIG file or --preset (one of them)")
    if preset is not None:
        if preset not in PRESETS:
            fail(console, f"unknown preset {preset!r}; choose one of {PRESETS}")
        if resume:
            fail(console, "the cpu-demo starts from scratch; drop --resume")
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
    try:
        from palaestra.trainers.config import TrainerConfig, validation_problems
        from palaestra.trainers.trainer import EveryEpisodeErrored, Trainer
    except ImportError as error:
        fail(console, f"training needs the 'train' extra: pip install 'palaestra[train]' ({error})")
    try:
        config = TrainerConfig.from_yaml(path)
    except (OSError, ValueError) as error:
        fail(console, error)
    overrides = {
        "output_dir": str(output_dir) if output_dir else None,
        "steps": steps,
        "seed": seed,
    }
    data = config.model_dump() | {k: v for k, v in overrides.items() if v is not None}
    if quiet:
        data["log"] = {**data["log"], "console": False}
    try:
        config = TrainerConfig.model_validate(data)
    except ValidationError as error:  # an override out of range, e.g. --steps 0
        fail(console, f"invalid option: {validation_problems(error)}")
    problem = config_problem(config, resume=resume)
    if problem is not None:
        fail(console, problem)
    try:
        trainer = Trainer.from_config(config, console=console)
    except (OSError, ImportError) as error:  # a model that does not load, a missing extra
        fail(console, f"cannot start training: {_first_line(error)}")
    with trainer:
        if resume:
            console.print(f"resumed at step {trainer.resume()}")
        try:
            history = trainer.train()
        except EveryEpisodeErrored as error:
            fail(console, error, code=1)
    if history:
        last = history[-1]
        console.print(
            Text(
                f"done: {trainer.step} steps, last reward {last.get('reward', float('nan')):.3f}; "
                f"metrics in {Path(config.output_dir) / 'metrics.jsonl'}"
            )
        )


def config_problem(config: TrainerConfig, *, resume: bool) -> str | None:
    """What would stop this run after the model has loaded, found before it loads: an
    unknown env id or one whose extra is missing, a model path that does not exist, no
    checkpoint to resume from. None when nothing is wrong."""
    from palaestra.trainers.trainer import latest_checkpoint

    problem = _env_problem(config)
    if problem is not None:
        return problem
    model_path = config.model.path
    if model_path is None:
        return "model.path is not set: give a local model directory or a Hugging Face Hub id"
    if not Path(model_path).expanduser().exists() and not HUB_ID.match(model_path):
        return (
            f"model.path {model_path!r} does not exist: give a local model directory (with "
            "config.json) or a Hugging Face Hub id such as Qwen/Qwen3-0.6B"
        )
    if resume and latest_checkpoint(config.output_dir) is None:
        return (
            f"--resume: no checkpoint under {Path(config.output_dir) / 'checkpoints'}; "
            "train without --resume first, or give the run's --output-dir"
        )
    return None


def _env_problem(config: TrainerConfig) -> str | None:
    """Make the env once, as training and eval will (not for envs on an env server)."""
    rollout = config.rollout
    if rollout.env_server is not None:
        return None
    kwargs_of = {"rollout.env_kwargs": rollout.env_kwargs}
    if config.eval_env_kwargs is not None:
        kwargs_of["eval_env_kwargs"] = config.eval_env_kwargs
    for key, kwargs in kwargs_of.items():
        try:
            palaestra.make(rollout.env_id, **kwargs).close()
        except (palaestra.UnknownEnvError, ImportError) as error:
            return f"rollout.env_id: {error}"
        except (TypeError, ValueError) as error:
            return f"{key} do not fit {rollout.env_id}: {error}"
    return None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def register_cli(app: typer.Typer) -> None:
    """Add ``train`` to the ``palaestra`` command."""
    app.command("train")(train_command)
