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
failed), and the RSS (MB) of the server and its worker processes, sampled every 10 s. The run
stops by itself; every server it starts is stopped.

    python benchmarks/bench_serve_soak.py --sessions 500 --seconds 120

The server runs in its own process, from the tree this script is in.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench_serve_faults import rss_mb
from bench_serve_vs_openenv import with_python_path

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys
import palaestra
from palaestra.server import ServerLimits, Stepping, build_server
from palaestra.testing.echo import EchoEnv


class ThreadedEcho(EchoEnv):
    threaded_step = True


palaestra.register("soak:ThreadedEcho-v0", ThreadedEcho)
stepping = Stepping(sys.argv[2], int(sys.argv[3]) if sys.argv[3] != "0" else None)
build_server(port=int(sys.argv[1]), stepping=stepping, limits=ServerLimits(max_sessions=4096)).run()
"""


def tree_rss_mb(pid: int) -> float:
    """RSS of the server and its worker processes (``--step-executor processes``)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return rss_mb(pid) + sum(rss_mb(int(child)) for child in children)


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


async def phase(
    url: str, family: str, sessions: int, seconds: float, pid: int, answers: list[str]
) -> dict:
    from palaestra.runner.network import EnvServerClient

    client = EnvServerClient(url, timeout_s=120)
    tally = Tally()
    stop_at = time.monotonic() + seconds
    if family == "echo":
        runs = [echo_session(client, tally, stop_at) for _ in range(sessions)]
    else:
        runs = [sql_session(client, tally, stop_at, answers, i) for i in range(sessions)]
    rss = [round(tree_rss_mb(pid))]

    async def sample() -> None:
        while True:
            await asyncio.sleep(10)
            rss.append(round(tree_rss_mb(pid)))

    sampler = asyncio.ensure_future(sample())
    started = time.perf_counter()
    await asyncio.gather(*runs)
    elapsed = time.perf_counter() - started
    sampler.cancel()
    await client.aclose()
    return {
        "steps_per_s": round(len(tally.steps) / elapsed, 1),
        "episodes_per_s": round(tally.episodes / elapsed, 2),
        "step_ms_p50_p99": [round(1000 * percentile(tally.steps, q), 1) for q in (0.5, 0.99)],
        "reset_ms_p50_p99": [round(1000 * percentile(tally.resets, q), 1) for q in (0.5, 0.99)],
        "mean_reward": round(sum(tally.rewards) / len(tally.rewards), 3) if tally.rewards else None,
        "errors": sum(tally.errors.values()),
        "first_errors": tally.errors.most_common(3),
        "rss_mb": rss,
    }


def serve(executor: str, processes: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-c", SERVER, str(port), executor, str(processes)]
    server = subprocess.Popen(command, cwd=ROOT, env=with_python_path(ROOT))
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
    args = parser.parse_args()
    phases = args.phases.split(",")
    answers = oracle_answers(64) if any(name.startswith("sql") for name in phases) else []
    print("load average before:", os.getloadavg())
    for name in phases:
        family, _, executor = name.partition(" ")
        server, url = serve(executor or "threads", args.step_processes)
        try:
            result = asyncio.run(
                phase(url, family, args.sessions, args.seconds, server.pid, answers)
            )
        finally:
            server.terminate()
            server.wait()
        print(json.dumps({name: result}))
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
