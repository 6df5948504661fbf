"""The ``palaestra`` command line: list, inspect and play environments; evaluate agents."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import palaestra
from palaestra.console import fail, text_panel
from palaestra.core.env import Env
from palaestra.evaluation.cli import register_cli as register_eval_cli
from palaestra.scaffold import write_env_package
from palaestra.server.cli import register_cli as register_serve_cli
from palaestra.server.retriever_cli import register_cli as register_retriever_cli
from palaestra.trainers.cli import register_cli as register_train_cli

app = typer.Typer(
    name="palaestra",
    help="Multi-turn text environments with verifiable rewards for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

EXAMPLE_TURNS = 4


PLAY_HELP = (
    "Type a move and press Enter (inside \\boxed{} or bare). Commands: :help shows this "
    "and the rules again, :q quits. An empty line is not a move."
)


IMPORT_HELP = (
    "Import a module that registers envs before the command runs: a module name (found from "
    "the current directory too) or a path to a .py file or package directory. Repeatable."
)


@app.callback()
def main_options(
    imports: Annotated[list[str] | None, typer.Option("--import", "-i", help=IMPORT_HELP)] = None,
) -> None:
    """Multi-turn text environments with verifiable rewards for LLM agents."""
    for target in imports or ():
        try:
            import_env_module(target)
        except ImportError as exc:
            fail(console, exc)


def import_env_module(target: str) -> None:
    """Import ``target`` for the envs it registers: a module name importable from the current
    directory or the installed packages, or a path to a ``.py`` file or a package directory
    (its folder goes on ``sys.path``, so worker processes import it the same way)."""
    if target.endswith(".py") or "/" in target:
        path = Path(target).expanduser().resolve()
        if not (path.suffix == ".py" and path.is_file()) and not (path / "__init__.py").is_file():
            raise ImportError(
                f"--import {target}: not a .py file or a package directory (one with __init__.py)"
            )
        folder, module = path.parent, path.stem
    else:
        folder, module = Path.cwd(), target
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.partition(".")[0]:
            raise ImportError(f"--import {target}: {exc}") from exc
        raise ImportError(
            f"--import {target}: no module {module!r} in {folder} or the installed packages; "
            "give a module name, or the path of a .py file or package directory"
        ) from exc
    except Exception as exc:  # the user's module itself failed: say where, in one line
        raise ImportError(f"--import {target} failed: {type(exc).__name__}: {exc}") from exc


def _make_or_exit(env_id: str) -> Env:
    """The env, or a one-line error naming the fix (a typo'd id, a missing extra)."""
    try:
        return palaestra.make(env_id)
    except (palaestra.UnknownEnvError, ImportError) as exc:
        fail(console, exc)


def _tool_names(env: Env, most: int | None = None) -> str:
    """The env's tool names, or their count past ``most`` (a table column stays narrow)."""
    names = [tool.get("function", tool).get("name", "?") for tool in env.tools]
    if most is not None and len(names) > most:
        return f"{len(names)} tools"
    return ", ".join(names) or "-"


@app.command("list")
def list_command(
    pattern: Annotated[
        str | None, typer.Argument(help="Shell glob over ids, e.g. 'game:*'.")
    ] = None,
) -> None:
    """Show every registered environment."""
    ids = palaestra.list_envs(pattern)
    if not ids:
        console.print(Text(f"no environment matches {pattern!r}"))
        raise typer.Exit(1)
    table = Table(title=f"{len(ids)} environments", title_justify="left")
    table.add_column("id", no_wrap=True, style="bold")
    for column in ("family", "turns", "tools", "kwargs", "description"):
        table.add_column(column, overflow="fold")
    for env_id in ids:
        spec = palaestra.spec(env_id)
        env = spec.make()
        kwargs = " ".join(f"{key}={value}" for key, value in spec.kwargs.items()) or "-"
        cells = (spec.family, str(env.max_turns or "-"), _tool_names(env, most=3), kwargs)
        table.add_row(Text(env_id), *map(Text, cells), Text(spec.summary()))
        env.close()
    console.print(table)


@app.command()
def show(
    env_id: Annotated[str, typer.Argument(help="Environment id, e.g. game:Wordle-v0.")],
    seed: Annotated[int, typer.Option(help="Seed of the example episode.")] = 0,
) -> None:
    """Describe an environment: what it is, its reward, and an example episode."""
    env = _make_or_exit(env_id)
    spec = palaestra.spec(env_id)
    low, high = env.reward_range
    console.print(text_panel(spec.summary(), title=escape(env_id), title_align="left"))
    console.print(
        f"[bold]family[/bold] {escape(spec.family)}   [bold]max turns[/bold] "
        f"{env.max_turns or '-'}   [bold]reward per step[/bold] [{low:g}, {high:g}]   "
        f"[bold]tools[/bold] {escape(_tool_names(env))}"
    )
    if spec.kwargs:
        console.print(f"[bold]kwargs[/bold] {escape(str(dict(spec.kwargs)))}")
    if spec.wrappers:
        console.print(f"[bold]wrappers[/bold] {escape(spec.wrapper_stack)}")
    _print_system_prompt(env)
    observation, _ = env.reset(seed=seed)
    console.print(_env_panel(observation, f"task (seed {seed})"))
    try:
        policy = env.oracle()
    except NotImplementedError:
        return
    for turn in range(1, EXAMPLE_TURNS + 1):
        action = policy(observation)
        observation, reward, terminated, truncated, _ = env.step(action)
        console.print(
            text_panel(
                action, title=f"oracle, turn {turn}", title_align="left", border_style="green"
            )
        )
        console.print(_env_panel(observation, f"env (reward {reward:g})"))
        if terminated or truncated:
            break
    else:
        console.print("[dim]...[/dim]")
    env.close()


def _env_panel(observation: str, title: str) -> Panel:
    return text_panel(observation, title=title, title_align="left", border_style="cyan")


def _print_system_prompt(env: Env) -> None:
    if env.system_prompt:
        console.print(
            text_panel(env.system_prompt, title="system prompt", title_align="left", style="dim")
        )


@app.command()
def play(
    env_id: Annotated[str, typer.Argument(help="Environment id, e.g. game:TicTacToe-v0.")],
    seed: Annotated[
        int | None, typer.Option(help="Seed of the episode (random if omitted).")
    ] = None,
) -> None:
    """Play an environment yourself in the terminal (:help shows the rules, :q quits)."""
    env = _make_or_exit(env_id)
    observation, _ = env.reset(seed=seed)
    _print_system_prompt(env)
    console.print(_env_panel(observation, escape(env_id)))
    console.print(Text(PLAY_HELP, style="dim"))
    total, turn = 0.0, 0
    while (action := _read_move(env, observation)) is not None:
        turn += 1
        step_observation, reward, terminated, truncated, info = env.step(action)
        total += reward
        console.print(_env_panel(step_observation, f"turn {turn}, reward {reward:g}"))
        if terminated or truncated:
            outcome = {True: "[green]success[/green]", False: "[red]failure[/red]"}.get(
                info.get("success"), "done"
            )
            console.print(f"{outcome}: return {total:g} in {turn} turns")
            break
    env.close()


def _read_move(env: Env, task: str) -> str | None:
    """The player's next move; None to quit. Empty lines and ``:`` commands are not moves."""
    while True:
        try:
            line = console.input("[bold green]your move>[/bold green] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return None
        command = line.strip()
        if command in (":q", ":quit"):
            return None
        if command in (":h", ":help", "?"):
            _print_system_prompt(env)
            console.print(_env_panel(task, "the task"))
            console.print(Text(PLAY_HELP))
        elif command.startswith(":"):
            console.print(Text(f"unknown command {command!r}: :help shows the commands"))
        elif command:
            return line
        else:
            console.print(Text("(an empty line is not a move; :help shows the rules)", "dim"))


@app.command("new")
def new_command(
    name: Annotated[
        str, typer.Argument(help="Package, module and env family name, e.g. lockgame.")
    ],
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Where to write it (default: ./NAME).")
    ] = None,
) -> None:
    """Write a package of your own envs to start from (an env with an oracle, its tests).

    Its pyproject.toml's entry point makes the envs visible to every command once installed.
    """
    target = directory or Path(name)
    try:
        files = write_env_package(name, target)
    except (ValueError, FileExistsError) as exc:
        fail(console, exc)
    for path in files:
        console.print(Text(f"wrote {path}"))
    console.print(
        Text(
            f"next: cd {target} && python -m pytest tests, then "
            f"palaestra --import {name} eval {name}:Safe-v0 (or pip install -e . and drop "
            "--import); docs/writing-envs.md walks through it"
        )
    )


register_eval_cli(app)
register_train_cli(app)
register_retriever_cli(app)
register_serve_cli(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
