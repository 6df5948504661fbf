"""Executions per second and latency: palaestra's local sandbox vs a subprocess per call vs GEM.

All run in the same process, one after another, on the same programs, so the ratios are
fair on a shared machine. GEM (PyPI ``gem-llm``) is measured through the function its
python tool calls, ``gem.utils.sandbox.run_python(code, "none")``; it is loaded from the
installed package without importing ``gem`` itself (whose ``__init__`` pulls in heavy
optional dependencies). Without ``gem-llm`` installed its rows are skipped. ``--before REF``
adds the local sandbox of an earlier commit (its ``palaestra/sandboxes`` read from git).

    python benchmarks/sandbox_throughput.py --calls 200 --before f20d92d --rounds 10

``--docker`` adds the docker backend (a warm pool of containers of ``$PALAESTRA_DOCKER_IMAGE``;
``bash .ci/docker-engine`` gives a machine an engine and an image built offline).

``--rounds N`` (with ``--before``) then alternates the two in N rounds of the warm-pool
throughput (trivial program, concurrency 16) and of the paced latency, and prints medians:
on a loaded machine a single pass of each mostly measures what the load did meanwhile.

A last table gives the latency of one trivial run at a time (``--pause-ms`` apart), what a
policy calling the python tool between generations sees; the tables above run calls back to
back, where a run shares the CPU with the preparation of the next runners.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from palaestra.sandboxes import LocalSandbox

PROGRAMS = {"trivial": "print(1 + 1)", "50ms": "import time\ntime.sleep(0.05)\nprint('done')"}
Runner = Callable[[str], str]


def subprocess_runner(code: str) -> str:
    """The naive baseline: a fresh interpreter per call."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=10
    )
    return done.stdout


def gem_runner() -> Runner | None:
    spec = importlib.util.find_spec("gem")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(spec.submodule_search_locations[0])
    modules = {}
    for name in ("gem.utils.constants", "gem.utils.sandbox"):
        path = root / "utils" / (name.rsplit(".", 1)[1] + ".py")
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        modules[name] = module
    run_python = modules["gem.utils.sandbox"].run_python
    return lambda code: run_python(code, "none", timeout=10)[1]


def sandbox_before(ref: str) -> type:
    """``LocalSandbox`` as it was at git ``ref``, imported as ``palaestra_before.sandboxes``."""
    root = Path(tempfile.mkdtemp(prefix="sandbox-before-"))
    package = root / "palaestra_before" / "sandboxes"
    package.mkdir(parents=True)
    (root / "palaestra_before" / "__init__.py").write_text("")
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", ref, "palaestra/sandboxes/"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for path in listing:
        source = subprocess.run(
            ["git", "show", f"{ref}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        (package / Path(path).name).write_text(
            source.replace("palaestra.sandboxes", "palaestra_before.sandboxes")
        )
    sys.path.insert(0, str(root))
    return importlib.import_module("palaestra_before.sandboxes.local").LocalSandbox


def measure(run: Runner, code: str, calls: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []

    def one(_: int) -> None:
        started = time.perf_counter()
        out = run(code)
        latencies.append(time.perf_counter() - started)
        if not out.strip():
            raise RuntimeError(f"empty output from a run of {code!r}")

    run(code)  # warm-up
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(calls)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "per_second": calls / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def paced_latency(run: Runner, calls: int, pause: float) -> dict[str, float]:
    """Latency of a trivial program run one at a time with ``pause`` seconds between runs,
    so each finds a ready worker and idle cores (back to back, a run also shares the CPU with
    the preparation of the next runners, which measures throughput instead)."""
    run(PROGRAMS["trivial"])
    latencies = []
    for _ in range(calls):
        time.sleep(pause)
        started = time.perf_counter()
        run(PROGRAMS["trivial"])
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def interleaved(runners: dict[str, Runner], rounds: int, calls: int, pause: float) -> None:
    """Warm-pool throughput and paced p50 of each runner, alternating in ``rounds`` rounds
    (the order flips each round); prints the medians and each round's figures."""
    rates: dict[str, list[float]] = {name: [] for name in runners}
    paced: dict[str, list[float]] = {name: [] for name in runners}
    for index in range(rounds):
        order = list(runners.items())
        for name, run in order if index % 2 == 0 else reversed(order):
            rates[name].append(measure(run, PROGRAMS["trivial"], calls, 16)["per_second"])
            paced[name].append(paced_latency(run, 25, pause)["p50_ms"])
    print(f"\n| backend | exec/s (trivial, concurrency 16), median of {rounds} | paced p50 ms, median | rounds' exec/s |")  # fmt: skip
    print("|---|---|---|---|")
    for name in runners:
        each = " ".join(f"{rate:.0f}" for rate in rates[name])
        print(f"| {name} | {statistics.median(rates[name]):.1f} | {statistics.median(paced[name]):.2f} | {each} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="executions per cell")
    parser.add_argument("--pool-size", type=int, default=16)
    parser.add_argument("--before", help="also measure the local sandbox of this git commit")
    parser.add_argument(
        "--rounds", type=int, default=0, help="with --before: interleaved rounds of the two"
    )
    parser.add_argument(
        "--pause-ms", type=float, default=20.0, help="pause between the paced latency runs"
    )
    parser.add_argument(
        "--docker", action="store_true", help="also measure DockerSandbox ($PALAESTRA_DOCKER_IMAGE)"
    )
    args = parser.parse_args()
    sandbox = LocalSandbox(pool_size=args.pool_size)
    sandbox.warm()
    runners: dict[str, Runner] = {
        "palaestra local": lambda code: sandbox.run(code, timeout=10).stdout
    }
    if args.before:
        before = sandbox_before(args.before)(pool_size=args.pool_size)
        before.warm()
        runners[f"palaestra local at {args.before}"] = lambda code: (
            before.run(code, timeout=10).stdout
        )
    if args.docker:
        from palaestra.sandboxes.docker import DockerSandbox

        docker = DockerSandbox(pool_size=args.pool_size)
        docker.warm()
        runners["palaestra docker"] = lambda code: docker.run(code, timeout=10).stdout
    runners["subprocess per call"] = subprocess_runner
    gem = gem_runner()
    if gem is not None:
        runners["GEM run_python"] = gem
    print(f"isolation: {sandbox.isolation_report()}")
    print("| program | concurrency | backend | exec/s | p50 ms | p99 ms | exec/s vs GEM |")
    print("|---|---|---|---|---|---|---|")
    for program, code in PROGRAMS.items():
        for concurrency in (1, 16):
            rows = {
                name: measure(run, code, args.calls, concurrency) for name, run in runners.items()
            }
            base = rows.get("GEM run_python", {}).get("per_second")
            for name, row in rows.items():
                ratio = f"{row['per_second'] / base:.1f}x" if base else "n/a"
                print(
                    f"| {program} | {concurrency} | {name} | {row['per_second']:.1f} | "
                    f"{row['p50_ms']:.1f} | {row['p99_ms']:.1f} | {ratio} |",
                    flush=True,
                )
    print(
        f"\n| backend | trivial program, one at a time, {args.pause_ms:g} ms apart: p50 ms | p99 ms |"
    )
    print("|---|---|---|")
    for name, run in runners.items():
        row = paced_latency(run, args.calls, args.pause_ms / 1000)
        print(f"| {name} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} |", flush=True)
    if args.before and args.rounds:
        pair = {name: runners[name] for name in list(runners)[:2]}
        interleaved(pair, args.rounds, args.calls, args.pause_ms / 1000)
    sandbox.close()


if __name__ == "__main__":
    main()
