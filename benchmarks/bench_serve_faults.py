"""Env server under two faults, on loopback: a slow env and a client that does not read.

1. Slow steps: 8 sessions each take a 1 s step (a thread-stepped env sleeping in ``step``)
   while another client steps a thread-stepped env as fast as answers come; reported: that
   client's slowest step meanwhile.
2. Unread answers: a client asks for 1,000 answers of 200 KB and reads none; reported: the
   server's RSS before and at its peak, and whether (and when) the server dropped the client.

    python benchmarks/bench_serve_faults.py

The server runs in its own process, from the tree this script is in.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench_serve_vs_openenv import with_python_path

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys, time
import palaestra
from palaestra.server import build_server
from palaestra.testing.echo import EchoEnv


class Big(EchoEnv):
    threaded_step = True

    def step(self, action):
        return "y" * 200_000, 0.0, False, False, {}


class Sleepy(EchoEnv):
    threaded_step = True

    def step(self, action):
        if action == "sleep":
            time.sleep(1.0)
        return super().step(action)


palaestra.register("fault:Big-v0", Big)
palaestra.register("fault:Sleepy-v0", Sleepy)
build_server(["fault:*"], port=int(sys.argv[1])).run()
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def sessions_open(port: int) -> float:
    import httpx

    for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
        if line.startswith("palaestra_sessions_open "):
            return float(line.split()[1])
    raise RuntimeError("no palaestra_sessions_open")


async def slow_steps(url: str) -> dict:
    from palaestra.runner import Task
    from palaestra.runner.network import EnvServerClient

    slow_client, quick_client = EnvServerClient(url), EnvServerClient(url)
    slow = [slow_client.acquire(Task("fault:Sleepy-v0")) for _ in range(8)]
    quick = quick_client.acquire(Task("fault:Sleepy-v0"))
    for handle in [*slow, quick]:
        await handle.areset(seed=0)
    await quick.astep("warm up")
    sleeping = [asyncio.ensure_future(handle.astep("sleep")) for handle in slow]
    await asyncio.sleep(0.05)
    worst = steps = 0
    while not all(step.done() for step in sleeping):
        started = time.perf_counter()
        await quick.astep("quick")
        worst = max(worst, time.perf_counter() - started)
        steps += 1
    await slow_client.aclose()
    await quick_client.aclose()
    return {"quick_steps": steps, "slowest_quick_step_ms": round(1000 * worst, 1)}


async def unread_answers(url: str, port: int, pid: int, patience_s: float = 30.0) -> dict:
    from websockets.asyncio.client import connect

    before = rss_mb(pid)
    ws_url = url.replace("http", "ws", 1) + "/sessions"
    async with connect(ws_url, max_queue=1, max_size=None) as ws:
        opening = [
            {"id": 0, "op": "create", "session": 0, "env": "fault:Big-v0"},
            {"id": 1, "op": "reset", "session": 0, "seed": 0},
        ]
        await ws.send(json.dumps(opening))
        for batch in range(10):
            steps = [
                {"id": 2 + 100 * batch + i, "op": "step", "session": 0, "action": "x"}
                for i in range(100)
            ]
            await ws.send(json.dumps(steps))
        started, peak, dropped_after = time.monotonic(), before, None
        while time.monotonic() - started < patience_s:
            await asyncio.sleep(0.25)
            peak = max(peak, rss_mb(pid))
            if sessions_open(port) == 0:
                dropped_after = round(time.monotonic() - started, 1)
                break
    return {
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "dropped_after_s": dropped_after,  # None: still served after patience_s
    }


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = with_python_path(ROOT)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        print("load average before:", os.getloadavg())
        print(json.dumps({"slow steps": asyncio.run(slow_steps(url))}))
        print(json.dumps({"unread answers": asyncio.run(unread_answers(url, port, server.pid))}))
        print("load average after:", os.getloadavg())
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
