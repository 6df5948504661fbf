"""The ``palaestra train`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

import palaestra
from palaestra.agents.spec import HUB_ID
from palaestra.console import fail
from palaestra.core.extras import extras_problem
from palaestra.trainers.run_dir import checkpoint_step, clear_run, describe_run, latest_checkpoint

if TYPE_CHECKING:
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.trainer import Trainer

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
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Start over in an output dir an earlier run used (clears it)."
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-step lines.")] = False,
) -> None:
    """Train a policy with turn-level RL: from a YAML config, or a preset such as cpu-demo."""
    console = Console()
    if (config is None) == (preset is None):
        fail(console, "give a CONFIG file or --preset (one of them)")
    if resume and overwrite:
        fail(
            console, "--resume continues the run in the output dir, --overwrite clears it: give one"
        )
    if preset is not None:
        if preset not in PRESETS:
            fail(console, f"unknown preset {preset!r}; choose one of {PRESETS}")
        if resume:
            fail(console, "the cpu-demo starts from scratch; drop --resume")
        from palaestra.trainers.demo import run_cpu_demo

        demo_dir = output_dir or Path("runs/cpu-demo")
        _claim_run_dir(demo_dir, overwrite=overwrite, console=console)
        with interrupt_exits(console, demo_dir, lambda: _checkpoint_step_or_0(demo_dir)):
            run_cpu_demo(
                demo_dir,
                seed=seed or 0,
                **({"steps": steps} if steps else {}),
                console=console,
            )
        return
    _train_from_config(
        config,
        output_dir,
        steps,
        seed,
        resume=resume,
        overwrite=overwrite,
        quiet=quiet,
        console=console,
    )


def _claim_run_dir(output_dir: Path, *, overwrite: bool, console: Console) -> None:
    """Refuse a directory that holds an earlier run, or clear it with ``overwrite``."""
    found = describe_run(output_dir)
    if found is None:
        return
    if not overwrite:
        fail(
            console,
            f"{output_dir} already holds a run ({found}): continue it with --resume, start "
            "over in it with --overwrite, or give another --output-dir",
        )
    clear_run(output_dir)
    console.print(Text(f"cleared the earlier run in {output_dir} ({found})"))


def _train_from_config(
    path: Path,
    output_dir: Path | None,
    steps: int | None,
    seed: int | None,
    *,
    resume: bool,
    overwrite: bool,
    quiet: bool,
    console: Console,
) -> None:
    try:
        from palaestra.trainers.trainer import Trainer
    except ImportError as error:
        fail(console, f"training needs the 'train' extra: pip install 'palaestra[train]' ({error})")
    overrides = {"output_dir": str(output_dir) if output_dir else None, "steps": steps}
    config = _load_config(path, overrides | {"seed": seed}, quiet=quiet, console=console)
    problem = config_problem(config, resume=resume)
    if problem is not None:
        fail(console, problem)
    if not resume:
        _claim_run_dir(Path(config.output_dir), overwrite=overwrite, console=console)
    try:
        trainer = Trainer.from_config(config, console=console)
    except (OSError, ImportError) as error:  # a model that does not load, a missing extra
        fail(console, f"cannot start training: {_first_line(error)}")
    history = _run(trainer, resume=resume, console=console)
    if history:
        last = history[-1]
        console.print(
            Text(
                f"done: {trainer.step} steps, last reward {last.get('reward', float('nan')):.3f}; "
                f"metrics in {Path(config.output_dir) / 'metrics.jsonl'}"
            )
        )


def _load_config(
    path: Path, overrides: dict[str, object], *, quiet: bool, console: Console
) -> TrainerConfig:
    """The YAML config with the command line's overrides, or a one-line error."""
    from palaestra.trainers.config import TrainerConfig, validation_problems

    try:
        config = TrainerConfig.from_yaml(path)
    except (OSError, ValueError) as error:
        fail(console, error)
    data = config.model_dump() | {k: v for k, v in overrides.items() if v is not None}
    if quiet:
        data["log"] = {**data["log"], "console": False}
    try:
        return TrainerConfig.model_validate(data)
    except ValidationError as error:  # an override out of range, e.g. --steps 0
        fail(console, f"invalid option: {validation_problems(error)}")


def _run(trainer: Trainer, *, resume: bool, console: Console) -> list[dict[str, float]]:
    """Train (after a resume, from its checkpoint); Ctrl-C ends it with one line, exit 130."""
    from palaestra.trainers.trainer import EveryEpisodeErrored

    total = trainer.config.steps
    with interrupt_exits(console, trainer.output_dir, lambda: trainer.step), trainer:
        if resume:
            start = trainer.resume()
            console.print(f"resumed at step {start}: training steps {start + 1}-{total}")
        try:
            return trainer.train()
        except EveryEpisodeErrored as error:
            fail(console, error, code=1)


@contextlib.contextmanager
def interrupt_exits(
    console: Console, output_dir: str | Path, step: Callable[[], int]
) -> Iterator[None]:
    """Turn Ctrl-C into one line naming the checkpoint to resume from, and exit code 130."""
    try:
        yield
    except KeyboardInterrupt:
        checkpoint = latest_checkpoint(output_dir)
        where = (
            f"the last checkpoint is {checkpoint}; continue with --resume"
            if checkpoint is not None
            else "no checkpoint was written yet"
        )
        console.print(Text(f"interrupted at step {step()}: {where}"), soft_wrap=True)
        raise typer.Exit(130) from None


def config_problem(config: TrainerConfig, *, resume: bool) -> str | None:
    """What would stop this run after the model has loaded, found before it loads: an
    unknown env id or one whose extra is missing, a model path that does not exist, no
    checkpoint to resume from. None when nothing is wrong."""
    rollout = config.rollout
    problem = extras_problem(
        env_ids=[rollout.env_id],
        agent=f"{rollout.engine}:{config.model.path}",
        env_server=rollout.env_server is not None,
    ) or _env_problem(config)
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
    return _resume_problem(config) if resume else None


def _resume_problem(config: TrainerConfig) -> str | None:
    """No checkpoint to resume from, or one already at the step budget."""
    checkpoint = latest_checkpoint(config.output_dir)
    if checkpoint is None:
        return (
            f"--resume: no checkpoint under {Path(config.output_dir) / 'checkpoints'}; "
            "train without --resume first, or give the run's --output-dir"
        )
    try:
        step = checkpoint_step(checkpoint)
    except ValueError as error:
        return f"--resume: {error}"
    if step >= config.steps:
        return (
            f"--resume: the latest checkpoint ({checkpoint}) is at step {step}, and the run "
            f"has {config.steps} steps: nothing is left to train; give --steps above {step}"
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


def _checkpoint_step_or_0(output_dir: Path) -> int:
    checkpoint = latest_checkpoint(output_dir)
    return 0 if checkpoint is None else checkpoint_step(checkpoint)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def register_cli(app: typer.Typer) -> None:
    """Add ``train`` to the ``palaestra`` command."""
    app.command("train")(train_command)
