"""GRPO steps on one GPU at Qwen2.5-0.5B's shape: palaestra's Trainer (HF engine) vs TRL's
GRPOTrainer: rollout and update time, peak GPU memory, rollout tokens per second.

The model is built here, nothing is downloaded: a random-init Qwen2 with Qwen2.5-0.5B's body
(24 layers, width 896, 14/2 attention heads, MLP 4864, tied embeddings) and a byte-level BPE
tokenizer trained on guess-the-number texts (:func:`palaestra.trainers.tiny.train_tokenizer`),
saved once and loaded by both trainers in bfloat16. Task: ``game:GuessTheNumber-v0`` (1..8,
one turn), 8 generations per prompt, at most 128 new tokens, temperature 1, the whole batch in
one micro-batch, AdamW, no KL term. Rows: palaestra with gradient checkpointing (its GPU
default), palaestra without, TRL 1.16 with its defaults (checkpointing on, HF ``generate``). Each trainer runs in a process of its own (so peak memory is its own);
times are medians over the timed steps after one warm-up step.

    python benchmarks/bench_gpu_train_step.py                # on a GPU: 64 and 256 episodes
    python benchmarks/bench_gpu_train_step.py --smoke        # tiny shapes on CPU: it runs
    python benchmarks/bench_gpu_train_step.py --trainers palaestra --profile prof/

``--profile DIR`` runs palaestra's rows under ``torch.profiler`` instead of timing them: one
warm-up step, then one profiled step, written to ``DIR/<trainer>-<episodes>.txt`` with the
decode's statistics (decode steps, the batch sizes they ran at) and the ops that took the
most CPU and GPU time, every thread included.

``--census`` also counts, with :class:`palaestra.agents.hf_shapes.AttentionShapeCensus`, the
generation forwards after the warm-up step that meet an attention shape new to their thread
(palaestra: the HF engine's generation thread; TRL: ``generate`` on the main thread), and
times palaestra's decode steps (mean forward) inside the trainer against the same decode
alone: the requests of one step (the task's prompt, ``episodes`` times) decoded by a
``RunningDecode`` of their own on a thread of their own, to the last token, one pass right
after each timed step (a first pass after the warm-up step is not timed); the ratio is the
median over those pairs, so load that changes during the run moves both sides of it.
``--shape-cost-ms`` charges that much per new shape, a CPU stand-in for the host-side
plan build of cuDNN attention on a GPU (leave it 0 there: the real cost is paid):

    python benchmarks/bench_gpu_train_step.py --census                 # on a GPU
    python benchmarks/bench_gpu_train_step.py --smoke --census --shape-cost-ms 56 --episodes 64 256

Needs ``pip install -e '.[train,bench]'`` (TRL). On a GPU machine without network, bring the
wheels of what its image lacks, downloaded where there is network for its Python (a CUDA
PyTorch image usually has torch, transformers, accelerate, pandas and pyarrow, but not
palaestra's own dependencies): ``pip download --no-deps --only-binary=:all: --python-version
3.12 --platform manylinux2014_x86_64 -d wheels trl==1.16.0 datasets dill multiprocess
gymnasium farama-notifications pydantic pydantic-core annotated-types typing-inspection``,
then ``pip install --no-index --no-deps --target site wheels/*.whl`` there and run with
``PYTHONPATH=site:.`` (the H200 run in ``benchmarks/RESULTS.md`` was made so).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from bench_train_step_vs_trl import ENV_ID, ENV_KWARGS, GENERATIONS, TRLRun

import palaestra
from palaestra.agents.hf_shapes import AttentionShapeCensus

LR = 1e-6
SHAPES = {
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
    },
    "smoke": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
    },
}
TRAINERS = ("palaestra", "palaestra-no-checkpointing", "trl")
DECODE_THREAD = "palaestra-hf-generate"


def build_model(directory: Path, shape: str) -> int:
    """Save the random-init model and its tokenizer to ``directory``; returns its parameters."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from palaestra.trainers import tiny
    from palaestra.trainers.demo import env_texts

    tokenizer = tiny.train_tokenizer(
        env_texts() + env_texts(ENV_ID, ENV_KWARGS, range(64)), vocab_size=1024
    )
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        head_dim=64,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        **SHAPES[shape],
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def palaestra_run(run: dict[str, Any]) -> dict[str, float]:
    """Train ``run["steps"] + 1`` steps with palaestra's Trainer; per-step medians."""
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.trainer import Trainer

    episodes = run["episodes"]
    config = TrainerConfig(
        steps=run["steps"] + 1,
        output_dir=run["out"],
        model={
            "path": run["model"],
            "dtype": run["dtype"],
            "gradient_checkpointing": not run["trainer"].endswith("-no-checkpointing"),
        },
        rollout={
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "group_size": GENERATIONS,
            "groups_per_step": episodes // GENERATIONS,
            "max_new_tokens": run["max_new_tokens"],
            "concurrency": episodes,
        },
        advantage={"estimator": "grpo"},
        optim={"lr": LR, "max_grad_norm": 1.0},
        update={"micro_batch_size": episodes},
        log={"console": False},
    )
    with Trainer.from_config(config) as trainer:
        if run.get("profile"):
            return _profiled_step(
                trainer, Path(run["profile"]) / f"{run['trainer']}-{episodes}.txt"
            )
        if run.get("census"):
            return _census_steps(trainer, run)
        _reset_peak_memory()
        history = trainer.train()[1:]  # the first step warms up
    return _medians(history)


def _medians(history: list[dict[str, float]]) -> dict[str, float]:
    return {
        "rollout_s": statistics.median(r["rollout_time"] for r in history),
        "update_s": statistics.median(r["update_time"] for r in history),
        "tokens_per_s": statistics.median(r["rollout_tokens_per_s"] for r in history),
        "peak_gb": _peak_memory_gb(),
    }


def _census_steps(trainer: Any, run: dict[str, Any]) -> dict[str, float]:
    """The timed steps under the shape census, each followed by the same decode alone (see
    --census): pairs taken seconds apart, so a change in the machine's load between them
    moves both sides of a ratio alike."""
    agent = trainer.engine.agent
    census = AttentionShapeCensus(new_shape_cost_s=run["shape_cost_ms"] / 1000)
    with census.watch(agent.model), DecodeAlone(agent, run, census) as alone:
        trainer.train(until=1)
        alone.run()  # its first pass meets its shapes; the timed passes reuse them
        history, inside, alone_ms, new = [], [], [], []
        for _ in range(run["steps"]):
            census.clear_forwards()
            history += trainer.train(until=trainer.step + 1)[-1:]
            inside.append(_mean_ms(census.recorded(DECODE_THREAD, decode_only=True)))
            new += census.recorded(DECODE_THREAD)
            alone_ms.append(_mean_ms(alone.run()))
    return {
        **_medians(history),
        "new_shapes": sum(f.new_shape for f in new) / len(new),
        "step_ms": statistics.median(inside),
        "alone_ms": statistics.median(alone_ms),
        "inside_over_alone": statistics.median(
            i / a for i, a in zip(inside, alone_ms, strict=True)
        ),
    }


def _mean_ms(forwards: list[Any]) -> float:
    return 1000 * statistics.fmean(f.seconds for f in forwards)


class DecodeAlone:
    """``run["episodes"]`` copies of the task's prompt decoded to ``max_new_tokens`` by a
    RunningDecode of their own, on one thread of their own that lives as long as this object
    (as the engine's generation thread does): :meth:`run` decodes once and returns that
    pass's decode forwards."""

    THREAD = "decode-alone"

    def __init__(self, agent: Any, run: dict[str, Any], census: AttentionShapeCensus):
        env = palaestra.make(ENV_ID, **ENV_KWARGS)
        task, _ = env.reset(seed=0)
        messages = [
            {"role": "system", "content": env.system_prompt},
            {"role": "user", "content": task},
        ]
        self.prompt = agent.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        self.agent, self.run_config, self.census = agent, run, census
        self.pool = ThreadPoolExecutor(1, thread_name_prefix=self.THREAD)

    def __enter__(self) -> DecodeAlone:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown()

    def run(self) -> list[Any]:
        return self.pool.submit(self._decode).result()

    def _decode(self) -> list[Any]:
        from palaestra.agents.hf_decode import DecodeRequest, RunningDecode

        agent, episodes = self.agent, self.run_config["episodes"]
        self.census.clear_forwards()
        decode = RunningDecode(
            agent.model,
            agent.tokenizer,
            sampling=agent.sampling,
            stop_token_ids=[-1],  # none: every row runs to the last token
            device=agent.device,
        )
        decode.admit(
            [
                DecodeRequest(list(self.prompt), i, self.run_config["max_new_tokens"])
                for i in range(episodes)
            ]
        )
        while decode.rows:
            decode.step()
            decode.pop_finished()
        return self.census.recorded(threading.current_thread().name, decode_only=True)


def _profiled_step(trainer: Any, report: Path) -> dict[str, float]:
    """One warm-up step, then one step under ``torch.profiler``; its tables go to ``report``."""
    from torch._C._profiler import _ExperimentalConfig
    from torch.profiler import ProfilerActivity, profile

    trainer.train(until=1)
    agent = trainer.engine.agent
    agent.step_rows.clear()
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    try:  # the generation thread's ops too, and the host's waits on the GPU
        config = _ExperimentalConfig(profile_all_threads=True, enable_cuda_sync_events=True)
    except TypeError:  # an older PyTorch: the calling thread's ops only
        config = _ExperimentalConfig(enable_cuda_sync_events=True)
    with profile(activities=activities, experimental_config=config) as profiler:
        step = trainer.train(until=2)[-1]
    steps = sum(agent.step_rows.values())
    sizes = sorted(agent.step_rows.items(), reverse=True)
    averages = profiler.key_averages()
    sections = [
        f"rollout {step['rollout_time']:.2f} s, update {step['update_time']:.2f} s (profiled)",
        f"decode steps {steps}, at {len(sizes)} batch sizes (rows: steps) {sizes}",
        averages.table(sort_by="self_cpu_time_total", row_limit=30),
    ]
    if torch.cuda.is_available():
        sections.append(averages.table(sort_by="self_cuda_time_total", row_limit=30))
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n\n".join(sections) + "\n")
    return {
        "rollout_s": step["rollout_time"],
        "update_s": step["update_time"],
        "tokens_per_s": step["rollout_tokens_per_s"],
        "peak_gb": _peak_memory_gb(),
    }


def trl_run(run: dict[str, Any]) -> dict[str, float]:
    """Train ``run["steps"] + 1`` steps with TRL's GRPOTrainer; per-step medians."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(run["model"], dtype=getattr(torch, run["dtype"]))
    trl = TRLRun(
        model,
        AutoTokenizer.from_pretrained(run["model"]),
        Path(run["out"]),
        prompts=run["episodes"] // GENERATIONS,
        steps=run["steps"] + 1,
        max_new_tokens=run["max_new_tokens"],
        lr=LR,
        bf16=torch.cuda.is_available() and run["dtype"] == "bfloat16",
    )
    _reset_peak_memory()
    census = AttentionShapeCensus(new_shape_cost_s=run.get("shape_cost_ms", 0.0) / 1000)
    if run.get("census"):
        with census.watch(model):
            trl.train()
    else:
        trl.train()
    rollout = trl.median_rollout()
    result = {
        "rollout_s": rollout,
        "update_s": trl.median_step() - rollout,
        "tokens_per_s": statistics.median(tokens / seconds for seconds, tokens in trl.rollouts[1:]),
        "peak_gb": _peak_memory_gb(),
    }
    if run.get("census"):
        result["new_shapes"] = _new_after_first_generate(census.recorded("MainThread"))
    return result


def _new_after_first_generate(forwards: list[Any]) -> float:
    """The share of ``generate``'s forwards after its first call (each call starts with the
    prefill, the one forward of more than one query position) that met a new shape."""
    prefills = [i for i, forward in enumerate(forwards) if forward.query_length > 1]
    later = forwards[prefills[1] :] if len(prefills) > 1 else []
    return sum(f.new_shape for f in later) / len(later) if later else float("nan")


def _reset_peak_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_memory_gb() -> float:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else float("nan")


def run_in_child(run: dict[str, Any]) -> dict[str, float]:
    """One trainer at one batch size, in a process of its own."""
    command = [sys.executable, __file__, "--child", json.dumps(run)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{run['trainer']} at {run['episodes']} episodes failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict[tuple[str, int], dict[str, float]]) -> str:
    """The results as a markdown table (no peak memory on a CPU); with ``--census``, the
    share of generation forwards meeting a new shape and the decode step inside the trainer
    against alone."""
    census = any("new_shapes" in r for r in results.values())
    extra = " new shapes | decode step ms | alone ms | ratio |" if census else ""
    lines = [
        "| trainer | episodes | rollout s | update s | peak GPU memory GB | rollout tokens/s |"
        + extra,
        "| --- | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * (4 if census else 0),
    ]
    for (trainer, episodes), r in results.items():
        line = (
            f"| {trainer} | {episodes} | {r['rollout_s']:.2f} | {r['update_s']:.2f} "
            f"| {_gb(r['peak_gb'])} | {r['tokens_per_s']:,.0f} |"
        )
        if census:
            line += f" {r['new_shapes']:.1%} |" + "".join(
                f" {r[key]:.2f} |" if key in r else " - |"
                for key in ("step_ms", "alone_ms", "inside_over_alone")
            )
        lines.append(line)
    return "\n".join(lines)


def _gb(value: float) -> str:
    return "-" if value != value else f"{value:.1f}"  # NaN on a CPU


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, CPU-sized run")
    parser.add_argument("--episodes", type=int, nargs="+", help="default 64 256 (smoke: 16)")
    parser.add_argument("--steps", type=int, help="timed steps after one warm-up (default 3)")
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    parser.add_argument("--profile", help="profile palaestra's rows into this directory")
    parser.add_argument(
        "--census", action="store_true", help="count new attention shapes; decode step vs alone"
    )
    parser.add_argument(
        "--shape-cost-ms", type=float, default=0.0, help="with --census: cost per new shape"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = json.loads(args.child)
        print(json.dumps(trl_run(run) if run["trainer"] == "trl" else palaestra_run(run)))
        return
    shape = "smoke" if args.smoke else "qwen2.5-0.5b"
    episodes = args.episodes or ([16] if args.smoke else [64, 256])
    common = {
        "steps": args.steps or (1 if args.smoke else 3),
        "max_new_tokens": 16 if args.smoke else 128,
        "dtype": "bfloat16" if torch.cuda.is_available() else "float32",
        "profile": str(Path(args.profile).resolve()) if args.profile else None,
        "census": args.census,
        "shape_cost_ms": args.shape_cost_ms,
    }
    if args.profile and "trl" in args.trainers:
        parser.error("--profile profiles palaestra's rows: leave trl out of --trainers")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        parameters = build_model(Path(tmp) / "model", shape)
        print(f"{shape}: {parameters:,} parameters, {common['dtype']}, {device}")
        for count in episodes:
            for trainer in args.trainers:
                run = {
                    **common,
                    "trainer": trainer,
                    "episodes": count,
                    "model": str(Path(tmp) / "model"),
                    "out": str(Path(tmp) / f"{trainer}-{count}"),
                }
                results[trainer, count] = run_in_child(run)
                print(f"  {trainer}, {count} episodes: {results[trainer, count]}", flush=True)
    print(table(results))


if __name__ == "__main__":
    main()
