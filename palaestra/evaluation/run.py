"""Evaluate an agent on env ids (globs allowed): run episodes, summarize, write the outputs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import palaestra
from palaestra.agents.base import Agent
from palaestra.core.extras import extras_problem
from palaestra.core.registry import UnknownEnvError
from palaestra.core.types import Episode
from palaestra.evaluation.metrics import EnvSummary, summarize
from palaestra.evaluation.report import write_html, write_jsonl
from palaestra.runner.network import EnvServerClient
from palaestra.runner.rollout import Runner
from palaestra.runner.tasks import Task, make_tasks


@dataclass
class EvalConfig:
    """What to evaluate: ``episodes`` tasks per env (seeds ``seed``, ``seed + 1``, ...), or with
    ``all_problems`` every problem of a dataset env exactly once (rows ``offset`` .. up to
    ``limit`` of them); each task rolled out ``samples`` times; ``pass_ks`` are the k of pass@k
    (each needs k <= samples); ``env_kwargs`` go to ``make`` for every env."""

    env_patterns: Sequence[str]
    episodes: int = 20
    all_problems: bool = False
    offset: int = 0
    limit: int | None = None
    samples: int = 1
    seed: int = 0
    concurrency: int = 32
    pass_ks: Sequence[int] = ()
    max_turns: int | None = None
    process_workers: int = 0
    env_server: str | None = None
    """URL of a ``palaestra serve`` server to host the envs (token: ``$PALAESTRA_ENV_SERVER_TOKEN``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.offset < 0 or (self.limit is not None and self.limit < 1):
            raise ValueError(f"need offset >= 0 and limit >= 1, got {self.offset} and {self.limit}")
        too_big = [k for k in self.pass_ks if not 1 <= k <= self.samples]
        if too_big:
            raise ValueError(
                f"pass@k needs 1 <= k <= samples per task ({self.samples}); got k={too_big}: "
                "raise --samples or lower --pass-k"
            )


@dataclass
class EvalResult:
    summaries: list[EnvSummary]
    episodes: list[Episode]
    wall_time_s: float
    files: dict[str, Path] = field(default_factory=dict)


def resolve_env_ids(patterns: Sequence[str]) -> list[str]:
    """Registered ids matching each pattern (exact id or shell glob), in order, deduplicated."""
    ids: list[str] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            matched = palaestra.list_envs(pattern)
            if not matched:
                raise UnknownEnvError(
                    f"no env id matches {pattern!r} (`palaestra list` shows every id)"
                )
        else:
            matched = [palaestra.spec(pattern).id]
        ids.extend(i for i in matched if i not in ids)
    return ids


def check_envs_load(env_ids: Sequence[str], env_kwargs: dict[str, Any] | None = None) -> None:
    """Check every extra the envs need and make each env once, so that a missing extra or
    kwargs that do not fit fail before any episode runs, in one line that names the fix,
    rather than in some episodes (a grader that imports its parser only for some answers)."""
    problem = extras_problem(env_ids=env_ids)
    if problem is not None:
        raise ImportError(problem)
    for env_id in env_ids:
        try:
            palaestra.make(env_id, **(env_kwargs or {})).close()
        except TypeError as error:
            raise ValueError(f"--env-kwargs {env_kwargs} do not fit {env_id}: {error}") from error


def check_agent_fits(agent: Agent, config: EvalConfig) -> None:
    """Agents that play from the env's own state (oracle, random) cannot reach envs in worker
    processes: say so before any episode runs."""
    kind = getattr(agent, "env_policy", None)
    if kind is not None and config.process_workers:
        raise ValueError(
            f"the {kind} agent reads the env's state, which --processes puts in other "
            "processes: drop --processes, or host the envs on an env server (--env-server)"
        )


def eval_tasks(env_ids: Sequence[str], config: EvalConfig) -> list[Task]:
    """The tasks of an evaluation: seeds, or every problem of each dataset env exactly once."""
    if not config.all_problems:
        seeds = range(config.seed, config.seed + config.episodes)
        return make_tasks(env_ids, seeds, group_size=config.samples, env_kwargs=config.env_kwargs)
    tasks: list[Task] = []
    for env_id in env_ids:
        count = palaestra.make(env_id, **config.env_kwargs).problem_count
        if count is None:
            raise ValueError(
                f"{env_id} generates its problems (no fixed set to run once each); "
                "evaluate it with --episodes instead of --all"
            )
        end = count if config.limit is None else min(count, config.offset + config.limit)
        indices = range(config.offset, end)
        tasks += make_tasks(
            [env_id], indices=indices, group_size=config.samples, env_kwargs=config.env_kwargs
        )
    return tasks


async def aevaluate(
    agent: Agent,
    config: EvalConfig,
    *,
    on_episode: Callable[[Episode], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> EvalResult:
    """Run the evaluation; ``on_start`` learns the number of episodes and ``on_episode`` sees
    each episode as it finishes (progress bars)."""
    env_ids = resolve_env_ids(config.env_patterns)
    check_agent_fits(agent, config)
    if config.env_server is None:
        check_envs_load(env_ids, config.env_kwargs)
    elif (problem := extras_problem(env_server=True)) is not None:
        raise ImportError(problem)
    tasks = eval_tasks(env_ids, config)
    if on_start is not None:
        on_start(len(tasks))
    host = None if config.env_server is None else EnvServerClient(config.env_server)
    runner = Runner(
        agent,
        concurrency=config.concurrency,
        max_turns=config.max_turns,
        process_workers=config.process_workers,
        host=host,
    )
    started = time.perf_counter()
    spans: dict[str, tuple[float, float]] = {}  # env id -> (first start, last end)
    finished: list[tuple[int, Episode]] = []
    try:
        async for position, episode in runner.stream_enumerated(tasks):
            end = time.perf_counter() - started
            first, last = spans.get(episode.env_id, (end - episode.duration_s, end))
            spans[episode.env_id] = (min(first, end - episode.duration_s), max(last, end))
            finished.append((position, episode))
            if on_episode is not None:
                on_episode(episode)
    finally:
        if host is not None:
            await host.aclose()
    episodes = [episode for _, episode in sorted(finished, key=lambda pair: pair[0])]
    wall_times = {env_id: last - first for env_id, (first, last) in spans.items()}
    summaries = summarize(episodes, pass_ks=config.pass_ks, wall_times=wall_times)
    summaries.sort(key=lambda s: env_ids.index(s.env_id))
    return EvalResult(summaries, episodes, time.perf_counter() - started)


def evaluate(
    agent: Agent,
    config: EvalConfig,
    *,
    on_episode: Callable[[Episode], None] | None = None,
) -> EvalResult:
    """Blocking :func:`aevaluate`."""
    return asyncio.run(aevaluate(agent, config, on_episode=on_episode))


def write_outputs(
    result: EvalResult, out_dir: Path, *, agent: str, config: EvalConfig
) -> dict[str, Path]:
    """Write ``trajectories.jsonl``, ``summary.json`` and ``report.html`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "trajectories": out_dir / "trajectories.jsonl",
        "summary": out_dir / "summary.json",
        "report": out_dir / "report.html",
    }
    write_jsonl(result.episodes, files["trajectories"])
    meta = {
        "agent": agent,
        "episodes": len(result.episodes),
        "samples per task": config.samples,
        "tasks": _describe_tasks(config),
        **({"env kwargs": json.dumps(config.env_kwargs)} if config.env_kwargs else {}),
        "wall time": f"{result.wall_time_s:.2f} s",
        "palaestra": palaestra.__version__,
    }
    summary = {"meta": meta, "envs": [s.to_dict() for s in result.summaries]}
    files["summary"].write_text(json.dumps(summary, indent=2), encoding="utf-8")
    write_html(
        result.summaries,
        result.episodes,
        files["report"],
        title=f"palaestra eval · {agent}",
        meta=meta,
    )
    result.files = files
    return files


def _describe_tasks(config: EvalConfig) -> str:
    if config.all_problems:
        end = "end" if config.limit is None else str(config.offset + config.limit - 1)
        return f"every problem, rows {config.offset}..{end}"
    return f"seeds {config.seed}..{config.seed + config.episodes - 1}"


__all__ = [
    "EvalConfig",
    "EvalResult",
    "aevaluate",
    "check_agent_fits",
    "check_envs_load",
    "eval_tasks",
    "evaluate",
    "resolve_env_ids",
    "write_outputs",
]
