"""Shared by the miniature reproductions in this folder: a tiny policy warm-started on an env,
trainer runs over conditions x seeds (in parallel processes if asked), and the results as a
JSON file and a plot of the mean and spread over seeds.

Every run goes through palaestra's own pieces, as the CPU demo (``palaestra train --preset
cpu-demo``) does: a byte-level BPE tokenizer trained on the env's texts and a random-init
2-layer Qwen2 (:mod:`palaestra.trainers.tiny`), an SFT warm start on the env's oracle
(:mod:`palaestra.trainers.sft`), then the :class:`~palaestra.trainers.trainer.Trainer`.
A seed's warm-started policy is built once and every condition of that seed starts from it,
so conditions differ only in what the experiment varies.

>>> warm = WarmStart("game:GuessTheNumber-v0", {"max_turns": 20}, sft_steps=60)  # doctest: +SKIP
>>> runs = run_experiment(warm, base, {"a": {}, "b": {...}}, [0, 1], "out/")      # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

Probe = Callable[[Any], dict[str, float]]
"""Measures something on a live :class:`~palaestra.trainers.trainer.Trainer` (e.g. the
gradient share of env tokens); must be a module-level function (runs may be in processes)."""

History = list[dict[str, float]]

PROBES_FILE = "probes.jsonl"
WARM_START_FILE = "warm_start.json"


@dataclass(frozen=True, slots=True)
class WarmStart:
    """How a seed's tiny policy is built: tokenizer corpus (oracle episodes), model size and
    the SFT warm start on ``expert``'s episodes of ``env_id`` (stopped after ``sft_steps`` or
    at ``sft_stop_loss``)."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    sft_steps: int = 60
    sft_stop_loss: float | None = None
    sft_lr: float = 3e-3
    sft_batch_size: int = 64
    demo_seeds: tuple[int, int] = (3_000_000, 3_000_256)
    corpus_seeds: tuple[int, int] = (2_000_000, 2_000_100)
    vocab_size: int = 1024
    hidden_size: int = 128
    num_layers: int = 2
    init_std: float = 0.1
    expert: Any = None
    """The demonstrator (an :class:`~palaestra.agents.base.Agent`); None: the env's oracle."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One trainer run: a condition's config overrides on one seed."""

    condition: str
    seed: int
    config: dict[str, Any]
    probe: Probe | None = None
    probe_every: int = 0


def build_warm_start(warm: WarmStart, seed: int, path: Path) -> dict[str, Any]:
    """Build, warm up and save (to ``path``) the tiny policy of ``seed``; returns the SFT
    losses and the time it took (also written to ``warm_start.json`` beside ``path``).
    A policy already saved at ``path`` is kept (a rerun into the same directory reuses it)."""
    import torch

    from palaestra.trainers import tiny
    from palaestra.trainers.demo import env_texts
    from palaestra.trainers.sft import collect_demonstrations, train_sft

    if (Path(path) / "config.json").exists():  # built before: the same seed gives the same policy
        return _read_json(Path(path).parent / WARM_START_FILE) or {"sft_losses": None}
    started = time.perf_counter()
    torch.manual_seed(seed)
    texts = env_texts(warm.env_id, warm.env_kwargs, range(*warm.corpus_seeds))
    tokenizer = tiny.train_tokenizer(texts, vocab_size=warm.vocab_size)
    model = tiny.tiny_qwen2(
        len(tokenizer),
        seed=seed,
        hidden_size=warm.hidden_size,
        num_layers=warm.num_layers,
        init_std=warm.init_std,
    )
    demos = collect_demonstrations(
        warm.env_id,
        range(*warm.demo_seeds),
        tokenizer,
        env_kwargs=warm.env_kwargs,
        expert=warm.expert,
    )
    losses = train_sft(
        model,
        demos,
        steps=warm.sft_steps,
        lr=warm.sft_lr,
        batch_size=warm.sft_batch_size,
        pad_token_id=tokenizer.pad_token_id,
        seed=seed,
        stop_loss=warm.sft_stop_loss,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    result = {"sft_losses": losses, "seconds": time.perf_counter() - started}
    write_results(Path(path).parent / WARM_START_FILE, result)
    return result


def train_run(spec: RunSpec, base: Mapping[str, Any], init: Path, output_dir: Path) -> History:
    """Train from the warm start at ``init`` with ``base`` updated by the run's overrides;
    with a probe, also measure it before the first step and every ``probe_every`` steps
    (appended to ``probes.jsonl`` beside the trainer's ``metrics.jsonl``). Returns the
    run's history (:func:`load_history`)."""
    from rich.console import Console

    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.run_dir import clear_run
    from palaestra.trainers.trainer import Trainer

    values = deep_merge(
        base,
        spec.config,
        {"seed": spec.seed, "output_dir": str(output_dir), "model": {"path": str(init)}},
    )
    values.setdefault("log", {})["console"] = False
    config = TrainerConfig.model_validate(values)
    probes = Path(output_dir) / PROBES_FILE
    probes.unlink(missing_ok=True)
    clear_run(output_dir)  # a run trained again (not --reuse) replaces the earlier one
    with Trainer.from_config(config, console=Console(quiet=True)) as trainer:
        if spec.probe is None or spec.probe_every <= 0:
            trainer.train()
        else:
            _append_json(probes, {"step": 0, **spec.probe(trainer)})
            while trainer.step < config.steps:
                trainer.train(until=min(trainer.step + spec.probe_every, config.steps))
                _append_json(probes, {"step": trainer.step, **spec.probe(trainer)})
    return load_history(output_dir)


def load_history(run_dir: str | Path) -> History:
    """A run's per-step records from its ``metrics.jsonl``, with the probes of
    ``probes.jsonl`` merged in by step (a probe before the first step becomes step 0)."""
    from palaestra.trainers.metrics_log import read_metrics

    records = {int(r["step"]): dict(r) for r in read_metrics(Path(run_dir) / "metrics.jsonl")}
    probes = Path(run_dir) / PROBES_FILE
    for probe in read_metrics(probes) if probes.exists() else []:
        records.setdefault(int(probe["step"]), {"step": probe["step"]}).update(probe)
    return [records[step] for step in sorted(records)]


def run_experiment(
    warm: WarmStart,
    base: Mapping[str, Any],
    conditions: Mapping[str, Mapping[str, Any]],
    seeds: Sequence[int],
    output_dir: str | Path,
    *,
    jobs: int = 1,
    probe: Probe | None = None,
    probe_every: int = 0,
    reuse: bool = False,
) -> dict[str, Any]:
    """Warm-start one policy per seed, then train every condition on every seed.

    ``base`` is a :class:`~palaestra.trainers.config.TrainerConfig` as a dict; each condition
    maps a name to the overrides it makes. With ``jobs > 1`` the warm starts, and then the
    runs, go to that many worker processes (one torch thread each). Returns the warm starts'
    SFT losses and every run's per-step history, by condition and seed. With ``reuse``
    nothing is trained: the runs already under ``output_dir`` are read back (also runs cut
    short, whose curves then end early).
    """
    root = Path(output_dir)
    inits = {seed: root / f"seed{seed}" / "init" for seed in seeds}
    specs = [  # seed by seed: a run cut short leaves whole seeds behind it
        RunSpec(name, seed, dict(overrides), probe, probe_every)
        for seed in seeds
        for name, overrides in conditions.items()
    ]
    run_dirs = [root / f"seed{s.seed}" / s.condition for s in specs]
    if reuse:
        warm_results = [_read_json(inits[s].parent / WARM_START_FILE) for s in seeds]
        histories = [load_history(d) for d in run_dirs]
    else:
        warm_results = _map(jobs, build_warm_start, [(warm, s, inits[s]) for s in seeds])
        calls = [(s, base, inits[s.seed], d) for s, d in zip(specs, run_dirs, strict=True)]
        histories = _map(jobs, train_run, calls)
    runs: dict[str, dict[int, History]] = {name: {} for name in conditions}
    for spec, history in zip(specs, histories, strict=True):
        runs[spec.condition][spec.seed] = history
    return {
        "warm_start": {
            **asdict(warm),
            "expert": getattr(warm.expert, "name", "oracle"),
            "per_seed": dict(zip(seeds, warm_results, strict=True)),
        },
        "runs": runs,
    }


def held_out(trainer: Any) -> dict[str, float]:
    """A :data:`Probe`: success, reward, turns, and turns of the won episodes, of the current
    policy on the trainer's held-out eval tasks (``eval_episodes`` seeds from
    ``eval_first_seed``)."""
    episodes = [e for e in trainer.eval_runner.run(trainer.eval_tasks()) if e.error is None]
    won = [e.num_turns for e in episodes if e.success]
    return {
        "eval/success": float(np.mean([e.success is True for e in episodes])),
        "eval/reward": float(np.mean([e.total_reward for e in episodes])),
        "eval/turns": float(np.mean([e.num_turns for e in episodes])),
        "eval/turns_won": float(np.mean(won)) if won else float("nan"),
    }


def points(history: History, key: str) -> dict[int, float]:
    """``{step: value}`` at the steps whose record has ``key`` (e.g. a probe's, step 0 too)."""
    return {int(r["step"]): _number(r[key]) for r in history if key in r}


def curve(history: History, key: str) -> list[float]:
    """The value of ``key`` at every step that has it, in step order (NaN where missing)."""
    return [_number(record.get(key)) for record in history if record["step"] > 0]


def stack(runs: Mapping[int, History], key: str) -> np.ndarray:
    """Seeds x steps array of ``key`` over training (shortest run's length)."""
    curves = [curve(history, key) for history in runs.values()]
    length = min(len(c) for c in curves)
    return np.asarray([c[:length] for c in curves], dtype=np.float64)


def window_mean(values: np.ndarray, start: int, stop: int | None) -> list[float]:
    """Per seed, the mean of steps ``[start, stop)`` (0-based step positions)."""
    return [float(np.nanmean(row[start:stop])) for row in values]


def mean_and_spread(per_seed: Sequence[float]) -> dict[str, Any]:
    """Mean, sample std, min and max over seeds, and the per-seed values."""
    values = np.asarray(per_seed, dtype=np.float64)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return {
        "mean": float(values.mean()),
        "std": std,
        "min": float(values.min()),
        "max": float(values.max()),
        "per_seed": [float(v) for v in values],
    }


def summarize_conditions(
    runs: Mapping[str, Mapping[int, History]],
    names: Sequence[str],
    train_keys: Sequence[str],
    probe_keys: Sequence[str],
    steps: int,
) -> dict[str, Any]:
    """:func:`summarize` for each condition in ``names`` (the last 10 steps, or all)."""
    return {
        name: summarize(runs[name], train_keys, probe_keys, tail=min(10, steps)) for name in names
    }


def summarize(
    runs: Mapping[int, History],
    train_keys: Sequence[str],
    probe_keys: Sequence[str] = (),
    *,
    head: int = 5,
    tail: int = 10,
) -> dict[str, Any]:
    """A condition's numbers over seeds: for each training-batch metric its mean over the
    first ``head`` and the last ``tail`` steps and its per-step mean and std curve; for each
    probe metric its value at the first and the last probe, and at every probe."""
    summary: dict[str, Any] = {}
    for key in train_keys:
        values = stack(runs, key)
        summary[key] = {
            "first_steps": mean_and_spread(window_mean(values, 0, head)),
            "last_steps": mean_and_spread(window_mean(values, -tail, None)),
            "curve_mean": values.mean(axis=0).tolist(),
            "curve_std": values.std(axis=0).tolist(),
        }
    for key in probe_keys:
        by_seed = [points(history, key) for history in runs.values()]
        steps = sorted(set.intersection(*(set(p) for p in by_seed)))
        if not steps:
            continue
        summary[key] = {
            "start": mean_and_spread([p[steps[0]] for p in by_seed]),
            "end": mean_and_spread([p[steps[-1]] for p in by_seed]),
            "at_steps": {step: mean_and_spread([p[step] for p in by_seed]) for step in steps},
        }
    return summary


def trim(runs: Mapping[str, Mapping[int, History]], keys: Sequence[str]) -> dict[str, Any]:
    """The histories of every condition and seed with only ``keys`` (and the step) kept, for
    a results file of a readable size."""
    return {
        name: {
            seed: [{k: r[k] for k in ("step", *keys) if k in r} for r in history]
            for seed, history in by_seed.items()
        }
        for name, by_seed in runs.items()
    }


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over the last axis (shorter windows at the start)."""
    cumulative = np.cumsum(values, axis=-1)
    out = np.empty_like(values)
    for t in range(values.shape[-1]):
        low = max(0, t - window + 1)
        total = cumulative[..., t] - (cumulative[..., low - 1] if low else 0.0)
        out[..., t] = total / (t - low + 1)
    return out


def plot_curves(
    path: str | Path,
    panels: Sequence[tuple[str, Mapping[str, np.ndarray]]],
    *,
    title: str,
    window: int = 5,
    hlines: Mapping[str, tuple[float, str]] | None = None,
) -> Path | None:
    """One panel per ``(ylabel, {label: seeds x steps})``: the mean over seeds (moving average
    over ``window`` steps) with a band of +-1 std over seeds. ``hlines`` maps a panel's
    ylabel to a reference line ``(y, label)``. None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (ylabel, series) in zip(axes[0], panels, strict=True):
        for label, values in series.items():
            smoothed = smooth(values, window)
            mean, std = smoothed.mean(axis=0), smoothed.std(axis=0)
            steps = np.arange(1, smoothed.shape[1] + 1)
            (line,) = ax.plot(steps, mean, label=f"{label} ({values.shape[0]} seeds)")
            ax.fill_between(steps, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        if hlines and ylabel in hlines:
            y, text = hlines[ylabel]
            ax.axhline(y, color="grey", linestyle="--", linewidth=1, label=text)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def write_results(path: str | Path, results: Mapping[str, Any]) -> Path:
    """Write ``results`` as indented JSON (NaN as null)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(results), indent=1) + "\n", encoding="utf-8")
    return path


def parse_args(
    description: str,
    *,
    steps: int,
    seeds: int = 3,
    argv: Sequence[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The scripts' shared command line: --seeds, --steps, --output-dir, --jobs, and
    --lr, --summarize (re-read finished runs), and --sft-steps / --demos to shrink the warm
    start (for smoke tests); ``extra`` adds a script's own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=list(range(seeds)), help="seeds to run"
    )
    parser.add_argument("--steps", type=int, default=steps, help="RL steps per run")
    parser.add_argument("--output-dir", default=None, help="runs, results JSON and plot")
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes (one torch thread each)"
    )
    parser.add_argument("--lr", type=float, default=None, help="override the RL learning rate")
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="train nothing: summarize and plot the runs already in --output-dir",
    )
    parser.add_argument("--sft-steps", type=int, default=None, help="override the warm start's")
    parser.add_argument(
        "--demos", type=int, default=None, help="oracle episodes for SFT and the tokenizer corpus"
    )
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


def config_from_args(base: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``base`` with the command line's --lr applied."""
    return deep_merge(base, {"optim": {"lr": args.lr}} if args.lr is not None else {})


def warm_start_from_args(warm: WarmStart, args: argparse.Namespace) -> WarmStart:
    """``warm`` with the command line's --sft-steps and --demos applied."""
    changes: dict[str, Any] = {}
    if args.sft_steps is not None:
        changes["sft_steps"] = args.sft_steps
    if args.demos is not None:
        changes["demo_seeds"] = (warm.demo_seeds[0], warm.demo_seeds[0] + args.demos)
        changes["corpus_seeds"] = (warm.corpus_seeds[0], warm.corpus_seeds[0] + args.demos)
    return replace(warm, **changes)


def deep_merge(*mappings: Mapping[str, Any]) -> dict[str, Any]:
    """Nested dicts merged left to right (later values win; dicts merge key by key).

    >>> deep_merge({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}, "b": 4})
    {'a': {'x': 1, 'y': 3}, 'b': 4}
    """
    merged: dict[str, Any] = {}
    for mapping in mappings:
        for key, value in mapping.items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
                merged[key] = deep_merge(merged[key], value)
            else:
                merged[key] = dict(value) if isinstance(value, Mapping) else value
    return merged


def _map(jobs: int, function: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    """``function(*call)`` for every call, in order: inline, or in ``jobs`` spawned processes."""
    if jobs <= 1:
        return [function(*call) for call in calls]
    context = get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_one_thread) as pool:
        futures = [pool.submit(function, *call) for call in calls]
        return [future.result() for future in futures]


def _append_json(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(_finite(record)) + "\n")


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _number(value: Any) -> float:
    """``value`` as a float; None (a NaN written to JSON) and missing values are NaN."""
    return float("nan") if value is None else float(value)


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
