"""The ``palaestra eval`` command: ``register_cli(app)`` adds it to a typer app."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from palaestra.agents.base import Agent, Sampling, agent_name, close_agent
from palaestra.agents.spec import SPEC_HELP, agent_spec_problem, make_agent
from palaestra.console import fail
from palaestra.core.extras import extras_problem
from palaestra.core.types import Episode
from palaestra.evaluation.metrics import EnvSummary
from palaestra.evaluation.run import (
    EvalConfig,
    EvalResult,
    aevaluate,
    check_agent_fits,
    check_envs_load,
    resolve_env_ids,
    write_outputs,
)

FAIL_FAST_EPISODES = 16
"""When this many episodes have finished and every one errored, the run stops."""


class FirstEpisodesFailed(Exception):
    """Every episode so far errored (the message: the last error's first line)."""


def eval_command(
    envs: Annotated[list[str], typer.Argument(help="Env ids or globs, e.g. 'game:*'.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help=SPEC_HELP)] = "oracle",
    episodes: Annotated[int, typer.Option("--episodes", "-n", help="Tasks (seeds) per env.")] = 20,
    all_problems: Annotated[
        bool, typer.Option("--all", help="Every problem of each dataset env exactly once.")
    ] = False,
    offset: Annotated[int, typer.Option(help="With --all: the first row.")] = 0,
    limit: Annotated[int | None, typer.Option(help="With --all: at most this many rows.")] = None,
    samples: Annotated[
        int, typer.Option("--samples", "-g", help="Rollouts per task (for pass@k).")
    ] = 1,
    pass_k: Annotated[
        list[int] | None, typer.Option("--pass-k", "-k", help="Report pass@k (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option(help="First seed; tasks use seed, seed+1, ...")] = 0,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c")] = 32,
    max_turns: Annotated[int | None, typer.Option(help="Cap on turns per episode.")] = None,
    temperature: Annotated[float, typer.Option(help="Model sampling temperature.")] = 1.0,
    max_tokens: Annotated[int, typer.Option(help="Max tokens per model reply.")] = 1024,
    processes: Annotated[
        int, typer.Option(help="Host envs in this many worker processes (CPU-heavy envs).")
    ] = 0,
    env_server: Annotated[
        str | None,
        typer.Option(
            help="Host the envs on this `palaestra serve` URL (token: $PALAESTRA_ENV_SERVER_TOKEN)."
        ),
    ] = None,
    env_kwargs: Annotated[
        str | None,
        typer.Option(help='Env kwargs as a JSON object, e.g. \'{"difficulty": "easy"}\'.'),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write trajectories and report here.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the table.")] = False,
) -> None:
    """Evaluate an agent on environments: results table, JSONL trajectories, HTML report."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)  # keep table rows on one line in logs
    try:
        ks = pass_k or ([1, samples] if samples > 1 else [])
        config = EvalConfig(
            envs,
            episodes=episodes,
            all_problems=all_problems,
            offset=offset,
            limit=limit,
            samples=samples,
            seed=seed,
            concurrency=concurrency,
            pass_ks=sorted(set(ks)),
            max_turns=max_turns,
            process_workers=processes,
            env_server=env_server,
            env_kwargs=parse_env_kwargs(env_kwargs),
        )
        the_agent = prepared_agent(agent, config, Sampling(max_tokens, temperature))
    except (ValueError, KeyError, ImportError, OSError, RuntimeError) as exc:
        fail(console, _first_line(str(exc)))
    try:
        with _episode_errors_summarized():
            result = asyncio.run(_run(the_agent, config, console, quiet))
    except (KeyError, ValueError, ImportError) as exc:  # unknown id, no match, missing extra
        fail(console, exc)
    except FirstEpisodesFailed as exc:  # e.g. no server behind the agent: stop, say why
        fail(console, f"the first {FAIL_FAST_EPISODES} episodes all errored, stopped: {exc}", 1)
    console.print(
        results_table(
            result.summaries, title=f"{agent_name(the_agent)} · {result.wall_time_s:.2f} s"
        )
    )
    files = {}
    if out is not None:
        files = write_outputs(result, out, agent=agent_name(the_agent), config=config)
        if not quiet:
            for label, path in files.items():
                console.print(Text.assemble((f"{label:>12} ", "dim"), str(path)))
    _report_errors(console, result.episodes, files.get("trajectories"))


def parse_env_kwargs(text: str | None) -> dict[str, Any]:
    """``--env-kwargs``: a JSON object (empty when not given)."""
    if text is None:
        return {}
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--env-kwargs is not valid JSON ({error}): {text!r}") from error
    if not isinstance(kwargs, dict):
        raise ValueError(
            f'--env-kwargs takes a JSON object such as \'{{"difficulty": "easy"}}\', got {text!r}'
        )
    return kwargs


def prepared_agent(spec: str, config: EvalConfig, sampling: Sampling) -> Agent:
    """The agent, built only once everything cheap to check is right (env ids, env kwargs,
    every extra, the model path), so that a typo fails in a second, not after a model load."""
    env_ids = resolve_env_ids(config.env_patterns)
    if config.env_server is None:
        check_envs_load(env_ids, config.env_kwargs)
    problem = extras_problem(agent=spec, env_server=config.env_server is not None)
    problem = problem or agent_spec_problem(spec)
    if problem is not None:
        raise ValueError(problem)
    agent = make_agent(spec, sampling=sampling)
    check_agent_fits(agent, config)
    return agent


def _report_errors(console: Console, episodes: list[Episode], trajectories: Path | None) -> None:
    """Say what went wrong in errored episodes; leave with exit code 1 when every one did."""
    errors = Counter(_first_line(e.error) for e in episodes if e.error is not None)
    if not errors:
        return
    count = sum(errors.values())
    (message, times), *others = errors.most_common()
    more = f" (and {len(others)} other error(s))" if others else ""
    where = (
        f"transcripts in {trajectories}"
        if trajectories is not None
        else "rerun with --out DIR to keep the transcripts"
    )
    if count == len(episodes):
        fail(console, f"every episode errored ({count}): {message}{more}", code=1)
    console.print(
        Text(
            f"{count} of {len(episodes)} episode(s) errored, {times} with: {message}{more}; {where}",
            "yellow",
        )
    )


def _first_line(error: str) -> str:
    line = error.strip().splitlines()[0] if error.strip() else "unknown error"
    return line if len(line) <= 300 else line[:300] + "..."


@contextlib.contextmanager
def _episode_errors_summarized() -> Iterator[None]:
    """Silence the runner's warning per failed episode (the command sums them up instead)."""
    runner_log = logging.getLogger("palaestra.runner")
    quiet = logging.NullHandler()
    runner_log.addHandler(quiet)
    propagate, runner_log.propagate = runner_log.propagate, False
    try:
        yield
    finally:
        runner_log.removeHandler(quiet)
        runner_log.propagate = propagate


async def _run(agent, config: EvalConfig, console: Console, quiet: bool) -> EvalResult:
    progress = Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>8} ep/s  errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    )
    state = {"done": 0, "errors": 0}
    with progress:
        bar = progress.add_task("eval", total=None, rate="", errors=0)

        def on_episode(episode: Episode) -> None:
            state["done"] += 1
            state["errors"] += episode.error is not None
            if state["errors"] == state["done"] == FAIL_FAST_EPISODES:
                raise FirstEpisodesFailed(_first_line(episode.error or ""))
            elapsed = progress.tasks[0].elapsed or 1e-9
            progress.update(
                bar, advance=1, rate=f"{state['done'] / elapsed:,.0f}", errors=state["errors"]
            )

        try:
            return await aevaluate(
                agent,
                config,
                on_episode=on_episode,
                on_start=lambda total: progress.update(bar, total=total),
            )
        finally:
            await close_agent(agent)


def results_table(summaries: list[EnvSummary], *, title: str = "") -> Table:
    """A rich table with one row per env; the means of a row with errored episodes are over
    its completed episodes only, marked ``*`` and explained under the table."""
    ks = sorted({k for s in summaries for k in s.pass_at})
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("env", style="cyan", no_wrap=True, min_width=3)
    for name in ["episodes", "tasks", "reward", "success", "turns", "tokens", "errors", "wall s"]:
        table.add_column(name, justify="right", no_wrap=True)
    for k in ks:
        table.add_column(f"pass@{k}", justify="right", no_wrap=True)
    for s in summaries:
        mark = "" if s.complete else "*"
        table.add_row(
            Text(s.env_id),
            str(s.episodes),
            str(s.distinct_tasks),
            _cell(s.mean_reward, "{:.3f}", mark),
            _success_cell(s.success_rate, mark),
            _cell(s.mean_turns, "{:.1f}", mark),
            _cell(s.mean_tokens, "{:.0f}", mark),
            f"[red]{s.errors}[/red]" if s.errors else "0",
            f"{s.wall_time_s:.2f}",
            *[f"{s.pass_at[k]:.3f}" if k in s.pass_at else "–" for k in ks],
        )
    incomplete = [s for s in summaries if not s.complete]
    if incomplete:
        errored = sum(s.errors for s in incomplete)
        total = sum(s.episodes for s in incomplete)
        table.caption = (
            f"* over completed episodes only: {errored} of {total} episodes of "
            f"{len(incomplete)} env(s) errored"
        )
        table.caption_justify = "left"
        table.caption_style = "yellow"
    return table


def _cell(value: float | None, form: str, mark: str) -> str:
    return "–" if value is None else form.format(value) + mark


def _success_cell(rate: float | None, mark: str) -> str:
    if rate is None:
        return "–"
    style = "green" if rate >= 0.8 else "yellow" if rate >= 0.3 else "red"
    return f"[{style}]{rate:.0%}{mark}[/{style}]"


def register_cli(app: typer.Typer) -> None:
    """Add ``eval`` to the ``palaestra`` command."""
    app.command("eval")(eval_command)
