"""Env server soak: many sessions for minutes, on loopback, each phase against a fresh server.

Phases (each ``--seconds`` long, ``--sessions`` sessions on one client connection):

1. ``echo``: a thread-stepped env (every step hops to its session's thread); each session
   resets, steps 20 times, and starts over.
2. ``sql threads`` / ``sql processes``: a real family (``sql:Mixed-v0``; each episode
   answers with the oracle's query, worked out by the client before the phase, over 64
   seeds), the server's envs on session threads, then in worker processes
   (``--step-executor processes``).

Reported per phase: steps/s, step and reset latency p50/p99 (ms), errored requests (with
their first messages), episodes/s, the mean reward (SQL: 1.0 when no correct query
failed), and memory: ``rss`` lists ``[seconds, episodes served, MB]`` every
``--sample-every`` seconds, MB being the RSS of the server and every process under it (step
and grading workers); ``rss_closed_mb`` is that RSS once the client has closed every
session. The run stops by itself; every server it starts is stopped.

    python benchmarks/bench_serve_soak.py --sessions 500 --seconds 120

``--memory-report`` also asks the server (by SIGUSR1, at each sample) where its memory is:
its RSS split by mapping (``heap``, anonymous, file-backed), what SQLite has allocated
(``sqlite3_memory_used``), its threads, and the most numerous objects the garbage collector
tracks; with ``--tracemalloc``, the source lines that hold the most Python memory too (it
slows the server down). These reports are debugging aids, not figures to compare.

The server runs in its own process, from the tree this script is in.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench_serve_faults import rss_mb
from bench_serve_vs_openenv import with_python_path

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import os
import sys
import palaestra
from palaestra.server import ServerLimits, Stepping, build_server, memory
from palaestra.testing.echo import EchoEnv


class ThreadedEcho(EchoEnv):
    threaded_step = True


palaestra.register("soak:ThreadedEcho-v0", ThreadedEcho)
if os.environ.get("SOAK_REPORT"):
    sys.path.insert(0, os.environ["SOAK_BENCHMARKS"])
    from bench_serve_soak import install_memory_report

    install_memory_report(os.environ["SOAK_REPORT"], bool(os.environ.get("SOAK_TRACEMALLOC")))
stepping = Stepping(sys.argv[2], int(sys.argv[3]) if sys.argv[3] != "0" else None)
memory.cap_malloc_arenas()  # as palaestra serve does
build_server(port=int(sys.argv[1]), stepping=stepping, limits=ServerLimits(max_sessions=4096)).run()
"""


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children of any of its threads, and theirs)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def tree_rss_mb(pid: int) -> float:
    """RSS of the server and every process under it: step workers (``--step-executor
    processes``) and the grading workers that run agents' SQL queries."""
    total = rss_mb(pid)
    for child in descendants(pid):
        with contextlib.suppress(OSError, RuntimeError):  # gone meanwhile
            total += rss_mb(child)
    return total


def smaps_mb(pid: int) -> dict[str, float]:
    """The RSS of ``pid`` by kind of mapping: ``heap`` (brk), ``anon`` (malloc's other
    arenas, thread stacks, mmapped blocks) and ``files`` (code, mapped files)."""
    kinds: Counter[str] = Counter()
    kind = "anon"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields[0].endswith(":"):
            if fields[0] == "Rss:":
                kinds[kind] += int(fields[1])
            continue
        name = fields[5] if len(fields) > 5 else ""
        kind = "heap" if name == "[heap]" else "files" if name.startswith("/") else "anon"
    return {name: round(kb / 1024, 1) for name, kb in kinds.items()}


def install_memory_report(path: str, trace: bool) -> None:
    """(In the server) on SIGUSR1, write where the memory is to ``path`` (JSON; see the
    module docstring)."""
    import ctypes
    import gc
    import signal
    import threading
    import tracemalloc

    if trace:
        tracemalloc.start(1)
    try:
        sqlite = ctypes.CDLL("libsqlite3.so.0")
        sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    except OSError:
        sqlite = None

    def report(*_: object) -> None:
        gc.collect()  # count live objects, not garbage waiting for a collection
        types = Counter(type(item).__name__ for item in gc.get_objects())
        found = {
            "rss_by_mapping_mb": smaps_mb(os.getpid()),
            "sqlite_mb": round(sqlite.sqlite3_memory_used() / 2**20, 1) if sqlite else None,
            "threads": threading.active_count(),
            "gc_objects": sum(types.values()),
            "gc_top": types.most_common(8),
        }
        if trace:
            lines = tracemalloc.take_snapshot().statistics("lineno")[:8]
            found["python_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
            found["python_top"] = [
                [
                    f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:{s.traceback[0].lineno}",
                    round(s.size / 2**20, 1),
                ]
                for s in lines
            ]
        Path(path + ".part").write_text(json.dumps(found))
        os.replace(path + ".part", path)

    signal.signal(signal.SIGUSR1, report)


def ask_report(pid: int, path: Path, timeout_s: float = 30.0) -> dict | None:
    """Ask the server for a memory report (:func:`install_memory_report`) and wait for it."""
    import signal

    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    give_up = time.monotonic() + timeout_s
    while time.monotonic() < give_up:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.2)
    return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Tally:
    """Latencies and errors of one phase."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.resets: list[float] = []
        self.episodes = 0
        self.rewards: list[float] = []
        self.errors: Counter[str] = Counter()

    async def timed(self, into: list[float], call):
        started = time.perf_counter()
        try:
            return await call
        finally:
            into.append(time.perf_counter() - started)


async def echo_session(client, tally: Tally, stop_at: float) -> None:
    from palaestra.runner import Task

    handle = client.acquire(Task("soak:ThreadedEcho-v0"))
    seed = 0
    while time.monotonic() < stop_at:
        try:
            await tally.timed(tally.resets, handle.areset(seed=seed))
            for turn in range(20):
                await tally.timed(tally.steps, handle.astep(f"a{turn}"))
            tally.episodes += 1
        except Exception as exc:  # counted, and the session starts over
            tally.errors[str(exc)[:120]] += 1
            handle = client.acquire(Task("soak:ThreadedEcho-v0"))
        seed += 1


def oracle_answers(count: int) -> list[str]:
    """The oracle's answer to ``sql:Mixed-v0`` for seeds ``0 .. count - 1`` (computed here
    once, so that both executors get the same actions and the client does no SQL meanwhile)."""
    import palaestra

    answers = []
    for seed in range(count):
        env = palaestra.make("sql:Mixed-v0")
        obs, _ = env.reset(seed=seed)
        answers.append(env.oracle()(obs))
        env.close()
    return answers


async def sql_session(client, tally: Tally, stop_at: float, answers: list[str], first: int) -> None:
    from palaestra.runner import Task

    task, episode = Task("sql:Mixed-v0"), first
    while time.monotonic() < stop_at:
        seed = episode % len(answers)
        handle = client.acquire(task)
        try:
            await tally.timed(tally.resets, handle.areset(seed=seed))
            for _ in range(3):
                _, reward, terminated, truncated, _ = await tally.timed(
                    tally.steps, handle.astep(answers[seed])
                )
                if terminated or truncated:
                    break
            tally.episodes += 1
            tally.rewards.append(reward)
            client.release(task, handle, healthy=True)
        except Exception as exc:
            tally.errors[str(exc)[:120]] += 1
            client.release(task, handle, healthy=False)
        episode += 7


async def wait_closed(url: str, timeout_s: float = 120.0) -> None:
    """Wait until the server has closed every session (a busy server answers slowly)."""
    import httpx

    give_up = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        while time.monotonic() < give_up:
            with contextlib.suppress(httpx.HTTPError):
                text = (await http.get(f"{url}/metrics")).text
                if "\npalaestra_sessions_open 0\n" in f"\n{text}":
                    return
            await asyncio.sleep(0.2)


async def phase(
    url: str,
    family: str,
    sessions: int,
    seconds: float,
    pid: int,
    answers: list[str],
    sample_every: float,
    report: Path | None,
) -> dict:
    from palaestra.runner.network import EnvServerClient

    client = EnvServerClient(url, timeout_s=120)
    tally = Tally()
    stop_at = time.monotonic() + seconds
    if family == "echo":
        runs = [echo_session(client, tally, stop_at) for _ in range(sessions)]
    else:
        runs = [sql_session(client, tally, stop_at, answers, i) for i in range(sessions)]
    started = time.perf_counter()
    rss = [[0, 0, round(tree_rss_mb(pid))]]
    reports = []

    async def take_report() -> None:
        if report is not None:
            reports.append(await asyncio.to_thread(ask_report, pid, report))

    async def sample() -> None:
        while True:
            await asyncio.sleep(sample_every)
            at = round(time.perf_counter() - started)
            rss.append([at, tally.episodes, round(tree_rss_mb(pid))])
            print("rss", rss[-1], file=sys.stderr, flush=True)  # seconds, episodes, MB
            await take_report()

    sampler = asyncio.ensure_future(sample())
    await asyncio.gather(*runs)
    elapsed = time.perf_counter() - started
    sampler.cancel()
    await client.aclose()
    await wait_closed(url)
    await asyncio.sleep(10)  # the envs close on their threads; the reaper trims after
    closed = round(tree_rss_mb(pid))
    await take_report()
    return {
        "steps_per_s": round(len(tally.steps) / elapsed, 1),
        "episodes_per_s": round(tally.episodes / elapsed, 2),
        "step_ms_p50_p99": [round(1000 * percentile(tally.steps, q), 1) for q in (0.5, 0.99)],
        "reset_ms_p50_p99": [round(1000 * percentile(tally.resets, q), 1) for q in (0.5, 0.99)],
        "mean_reward": round(sum(tally.rewards) / len(tally.rewards), 3) if tally.rewards else None,
        "errors": sum(tally.errors.values()),
        "first_errors": tally.errors.most_common(3),
        "rss": rss,
        "rss_closed_mb": closed,
        **({"memory_reports": reports} if reports else {}),
    }


def serve(
    executor: str, processes: int, report: Path | None, trace: bool
) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-c", SERVER, str(port), executor, str(processes)]
    env = with_python_path(ROOT)
    if report is not None:
        env |= {"SOAK_REPORT": str(report), "SOAK_BENCHMARKS": str(ROOT / "benchmarks")}
        env |= {"SOAK_TRACEMALLOC": "1"} if trace else {}
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--step-processes", type=int, default=2)
    parser.add_argument("--phases", default="echo,sql threads,sql processes")
    parser.add_argument("--sample-every", type=float, default=10.0, help="seconds")
    parser.add_argument("--memory-report", action="store_true")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    phases = args.phases.split(",")
    answers = oracle_answers(64) if any(name.startswith("sql") for name in phases) else []
    print("load average before:", os.getloadavg())
    for name in phases:
        family, _, executor = name.partition(" ")
        report = None
        if args.memory_report or args.tracemalloc:
            folder = tempfile.mkdtemp(prefix="soak-report-")
            report = Path(folder) / "report.json"
        server, url = serve(executor or "threads", args.step_processes, report, args.tracemalloc)
        try:
            result = asyncio.run(
                phase(
                    url,
                    family,
                    args.sessions,
                    args.seconds,
                    server.pid,
                    answers,
                    args.sample_every,
                    report,
                )
            )
        finally:
            server.terminate()
            server.wait()
            if report is not None:
                shutil.rmtree(report.parent, ignore_errors=True)
        print(json.dumps({name: result}))
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
