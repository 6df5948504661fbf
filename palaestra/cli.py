"""The ``palaestra`` command line: list, inspect and play environments; evaluate agents."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

import palaestra
from palaestra.core.env import Env
from palaestra.evaluation.cli import register_cli as register_eval_cli
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


def _make_or_exit(env_id: str) -> Env:
    try:
        return palaestra.make(env_id)
    except palaestra.UnknownEnvError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


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
        console.print(f"no environment matches {pattern!r}")
        raise typer.Exit(1)
    table = Table(title=f"{len(ids)} environments", title_justify="left")
    table.add_column("id", no_wrap=True, style="bold")
    for column in ("family", "turns", "tools", "kwargs", "description"):
        table.add_column(column, overflow="fold")
    for env_id in ids:
        spec = palaestra.spec(env_id)
        env = spec.make()
        kwargs = " ".join(f"{key}={value}" for key, value in spec.kwargs.items()) or "-"
        table.add_row(
            env_id,
            spec.family,
            str(env.max_turns or "-"),
            _tool_names(env, most=3),
            kwargs,
            spec.summary(),
        )
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
    console.print(Panel(spec.summary(), title=env_id, title_align="left"))
    console.print(
        f"[bold]family[/bold] {spec.family}   [bold]max turns[/bold] {env.max_turns or '-'}   "
        f"[bold]reward per step[/bold] [{low:g}, {high:g}]   [bold]tools[/bold] {_tool_names(env)}"
    )
    if spec.kwargs:
        console.print(f"[bold]kwargs[/bold] {dict(spec.kwargs)}")
    if spec.wrappers:
        console.print(f"[bold]wrappers[/bold] {escape(spec.wrapper_stack)}")
    if env.system_prompt:
        console.print(
            Panel(env.system_prompt, title="system prompt", title_align="left", style="dim")
        )
    observation, _ = env.reset(seed=seed)
    console.print(
        Panel(observation, title=f"task (seed {seed})", title_align="left", border_style="cyan")
    )
    try:
        policy = env.oracle()
    except NotImplementedError:
        return
    for turn in range(1, EXAMPLE_TURNS + 1):
        action = policy(observation)
        observation, reward, terminated, truncated, _ = env.step(action)
        console.print(
            Panel(action, title=f"oracle, turn {turn}", title_align="left", border_style="green")
        )
        console.print(
            Panel(
                observation,
                title=f"env (reward {reward:g})",
                title_align="left",
                border_style="cyan",
            )
        )
        if terminated or truncated:
            break
    else:
        console.print("[dim]...[/dim]")
    env.close()


@app.command()
def play(
    env_id: Annotated[str, typer.Argument(help="Environment id, e.g. game:TicTacToe-v0.")],
    seed: Annotated[
        int | None, typer.Option(help="Seed of the episode (random if omitted).")
    ] = None,
) -> None:
    """Play an environment yourself in the terminal (type :q to quit)."""
    env = _make_or_exit(env_id)
    observation, _ = env.reset(seed=seed)
    if env.system_prompt:
        console.print(
            Panel(env.system_prompt, title="system prompt", title_align="left", style="dim")
        )
    console.print(Panel(observation, title=env_id, title_align="left", border_style="cyan"))
    total, turn = 0.0, 0
    while True:
        try:
            action = console.input("[bold green]your move>[/bold green] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            break
        if action.strip() in (":q", ":quit"):
            break
        turn += 1
        observation, reward, terminated, truncated, info = env.step(action)
        total += reward
        console.print(
            Panel(
                observation,
                title=f"turn {turn}, reward {reward:g}",
                title_align="left",
                border_style="cyan",
            )
        )
        if terminated or truncated:
            outcome = {True: "[green]success[/green]", False: "[red]failure[/red]"}.get(
                info.get("success"), "done"
            )
            console.print(f"{outcome}: return {total:g} in {turn} turns")
            break
    env.close()


register_eval_cli(app)
register_train_cli(app)
register_retriever_cli(app)
register_serve_cli(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
