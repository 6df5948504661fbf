"""Load test: envs served over the network, palaestra vs OpenEnv, on loopback.

Each side serves a trivial echo env from its own server process; a load process opens
``--sessions`` concurrent sessions and steps each as fast as answers come back for
``--seconds`` (after a warm-up), timing every step. Reported per configuration: steps/s,
p50/p99 step latency, errors (failed, timed-out or wrong answers) and the ratio to OpenEnv.

palaestra is measured four ways: an env stepped inline on the server's event loop (cheap
pure-Python envs: the games) and one stepped on its session's thread (every other env:
math, code, SQL, tools, search, reasoning-gym), each over one WebSocket that multiplexes
every session (palaestra's client) and over one WebSocket per session. OpenEnv's client
opens one WebSocket per session, and its server steps every env on its session's thread,
so "thread, one socket per session" is the like-for-like row. OpenEnv's echo env is the one
its ``openenv init`` template generates. Rounds alternate the configurations (both servers
stay up); the table gives each configuration's median round and the load average before
and after. It also gives the CPU time per step of the server and of the load process: on a
busy machine, throughput mostly measures how often the scheduler runs each process, while
CPU time per step measures the work (Linux: read from /proc).

    python benchmarks/bench_serve_vs_openenv.py --openenv-python .venv-openenv/bin/python

``--openenv-python`` is an interpreter with ``openenv-core`` installed (the ``bench``
extra; default: this one); the OpenEnv row is skipped when it has none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INLINE_ID = "bench:Echo-v0"
THREAD_ID = "bench:ThreadedEcho-v0"

PALAESTRA_SERVER = f"""
import sys
import palaestra
from palaestra.server import build_server
from palaestra.testing.echo import EchoEnv


class ThreadedEchoEnv(EchoEnv):
    threaded_step = True  # stepped on its session's thread, like most envs


palaestra.register({INLINE_ID!r}, EchoEnv)
palaestra.register({THREAD_ID!r}, ThreadedEchoEnv)
build_server(["bench:*"], port=int(sys.argv[1])).run()
"""

OPENENV_ECHO = textwrap.dedent(
    '''
    """OpenEnv's echo env, as its ``openenv init`` template writes it (server and client)."""
    from typing import Any, Dict
    from uuid import uuid4

    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field


    class EchoAction(Action):
        message: str = Field(..., description="Message to echo back")


    class EchoObservation(Observation):
        echoed_message: str = Field(default="")
        message_length: int = Field(default=0)


    class EchoEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS: bool = True

        def __init__(self):
            self._state = State(episode_id=str(uuid4()), step_count=0)

        def reset(self) -> EchoObservation:
            self._state = State(episode_id=str(uuid4()), step_count=0)
            return EchoObservation(echoed_message="ready", message_length=0, done=False, reward=0.0)

        def step(self, action: EchoAction) -> EchoObservation:
            self._state.step_count += 1
            message = action.message
            return EchoObservation(
                echoed_message=message,
                message_length=len(message),
                done=False,
                reward=len(message) * 0.1,
                metadata={"original_message": message, "step": self._state.step_count},
            )

        @property
        def state(self) -> State:
            return self._state


    class EchoEnv(EnvClient[EchoAction, EchoObservation, State]):
        def _step_payload(self, action: EchoAction) -> Dict:
            return {"message": action.message}

        def _parse_result(self, payload: Dict) -> StepResult[EchoObservation]:
            obs = payload.get("observation", {})
            observation = EchoObservation(
                echoed_message=obs.get("echoed_message", ""),
                message_length=obs.get("message_length", 0),
                done=payload.get("done", False),
                reward=payload.get("reward"),
                metadata=obs.get("metadata", {}),
            )
            return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

        def _parse_state(self, payload: Dict) -> State:
            return State(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))


    app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=1024)
    '''
)


@dataclass(frozen=True)
class Setup:
    """One measured configuration."""

    side: str  # "palaestra" or "openenv"
    stepping: str  # "inline" or "thread"
    per_session: bool  # one WebSocket per session, else one for all

    @property
    def label(self) -> str:
        sockets = "one socket per session" if self.per_session else "one socket"
        return f"{self.side}, {self.stepping}, {sockets}"


SETUPS = [
    Setup("palaestra", "inline", False),
    Setup("palaestra", "inline", True),
    Setup("palaestra", "thread", False),
    Setup("palaestra", "thread", True),
    Setup("openenv", "thread", True),
]


async def drive(
    sessions: int, step: Callable[[int], Awaitable[object]], seconds: float, warmup: float
) -> dict[str, float]:
    """Step every session in a loop; latencies, errors and this process's CPU time counted
    after the warm-up only."""
    latencies: list[float] = []
    errors = 0
    cpu: list[float] = []
    start = time.perf_counter()
    measure_from, end = start + warmup, start + warmup + seconds

    async def loop(i: int) -> None:
        nonlocal errors
        while (now := time.perf_counter()) < end:
            try:
                await step(i)
            except Exception:
                if now >= measure_from:
                    errors += 1
                continue
            if now >= measure_from:
                latencies.append(time.perf_counter() - now)

    async def clock() -> None:  # tells the parent when the measured window starts and ends
        await asyncio.sleep(warmup)
        cpu.append(time.process_time())
        print("measuring", flush=True)
        await asyncio.sleep(seconds)
        cpu.append(time.process_time())
        print("measured", flush=True)

    await asyncio.gather(clock(), *(loop(i) for i in range(sessions)))
    latencies.sort()

    def quantile(q: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return {
        "steps": len(latencies),
        "steps_per_s": len(latencies) / seconds,
        "p50_ms": quantile(0.50),
        "p99_ms": quantile(0.99),
        "errors": errors,
        "client_us_per_step": 1e6 * (cpu[1] - cpu[0]) / max(1, len(latencies)),
    }


async def palaestra_load(
    url: str, env_id: str, sessions: int, seconds: float, warmup: float, connections: int
) -> dict:
    from palaestra.runner import Task
    from palaestra.runner.network import EnvServerClient

    hosts = [EnvServerClient(url, timeout_s=30) for _ in range(connections)]
    handles = [hosts[i % connections].acquire(Task(env_id)) for i in range(sessions)]
    await asyncio.gather(*(h.areset(seed=i) for i, h in enumerate(handles)))

    async def step(i: int) -> None:
        obs, *_ = await handles[i].astep("hello")
        if obs != "echo: hello":
            raise AssertionError(f"wrong answer {obs!r}")

    try:
        return await drive(sessions, step, seconds, warmup)
    finally:
        await asyncio.gather(*(host.aclose() for host in hosts))


async def openenv_load(url: str, sessions: int, seconds: float, warmup: float) -> dict:
    from openenv_echo import EchoAction, EchoEnv

    clients = [EchoEnv(base_url=url, message_timeout_s=30) for _ in range(sessions)]
    for client in clients:
        await client.connect()
    await asyncio.gather(*(client.reset() for client in clients))

    async def step(i: int) -> None:
        result = await clients[i].step(EchoAction(message="hello"))
        if result.observation.echoed_message != "hello":
            raise AssertionError(f"wrong answer {result.observation!r}")

    try:
        return await drive(sessions, step, seconds, warmup)
    finally:
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("the server exited at start-up")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port}")


def has_openenv(python: str) -> bool:
    try:
        probe = subprocess.run([python, "-c", "import openenv.core"], capture_output=True)
    except OSError:
        return False
    return probe.returncode == 0


def start_server(side: str, python: str, echo_dir: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if side == "palaestra":
        command = [python, "-c", PALAESTRA_SERVER, str(port)]
    else:
        command = [
            python, "-m", "uvicorn", "openenv_echo:app", "--app-dir", echo_dir,
            "--port", str(port), "--log-level", "warning",
        ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=with_python_path(ROOT))
    wait_for_port(port, server)
    return server, port


def with_python_path(*entries: str | Path) -> dict[str, str]:
    """This environment with ``entries`` first on ``PYTHONPATH`` (what it held kept after them,
    where dependencies may be installed)."""
    path = [str(entry) for entry in entries] + [os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(
    setup: Setup,
    python: str,
    server: subprocess.Popen,
    port: int,
    args: argparse.Namespace,
    echo_dir: str,
) -> dict:
    """One load process against a running server; its result, with the server's CPU time
    per step over the same measured window."""
    command = [python, __file__, "--load", setup.side, "--url", f"http://127.0.0.1:{port}"]
    command += ["--env-id", THREAD_ID if setup.stepping == "thread" else INLINE_ID]
    command += ["--connections", str(args.sessions if setup.per_session else 1)]
    for flag in ("sessions", "seconds", "warmup"):
        command += [f"--{flag}", str(getattr(args, flag))]
    env = with_python_path(ROOT, echo_dir)
    marks, last = [], ""
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as load:
        for line in load.stdout:  # type: ignore[union-attr]
            if line.strip() in ("measuring", "measured"):
                marks.append(cpu_seconds(server.pid))
            last = line
    if load.returncode != 0 or len(marks) != 2:
        raise RuntimeError(f"the {setup.label} load failed (exit code {load.returncode})")
    result = json.loads(last)
    result["server_us_per_step"] = 1e6 * (marks[1] - marks[0]) / max(1, result["steps"])
    return result


def measure(args: argparse.Namespace, setups: list[Setup], echo_dir: str) -> dict[Setup, list]:
    """Every setup once per round, both servers up throughout."""
    pythons = {"palaestra": sys.executable, "openenv": args.openenv_python}
    servers = {
        side: start_server(side, pythons[side], echo_dir) for side in {s.side for s in setups}
    }
    results: dict[Setup, list] = {setup: [] for setup in setups}
    try:
        for _ in range(args.rounds):
            for setup in setups:
                server, port = servers[setup.side]
                result = run_load(setup, pythons[setup.side], server, port, args, echo_dir)
                results[setup].append(result)
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait()
    return results


def median_result(runs: list[dict]) -> dict:
    """The run with the median steps/s (its latencies go with it)."""
    ordered = sorted(runs, key=lambda run: run["steps_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def report(args: argparse.Namespace, results: dict[Setup, list], loads: tuple) -> None:
    print(
        f"{args.sessions} sessions, {args.seconds:g} s after {args.warmup:g} s warm-up, "
        f"echo env, loopback, median of {args.rounds} round(s)"
    )
    before, after = (" ".join(f"{value:.2f}" for value in load) for load in loads)
    print(f"load average (1, 5, 15 min): before {before}, after {after}")
    medians = {setup: median_result(runs) for setup, runs in results.items()}
    openenv = next((r for s, r in medians.items() if s.side == "openenv"), None)
    print(
        "| setup | steps/s | p50 ms | p99 ms | errors | / OpenEnv | server us/step "
        "| client us/step | CPU per step, OpenEnv / this |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for setup, result in medians.items():
        cpu = result["server_us_per_step"] + result["client_us_per_step"]
        if openenv is None:
            ratio = cpu_ratio = ""
        else:
            ratio = f"{result['steps_per_s'] / openenv['steps_per_s']:.1f}x"
            openenv_cpu = openenv["server_us_per_step"] + openenv["client_us_per_step"]
            cpu_ratio = f"{openenv_cpu / cpu:.1f}x"
        errors = sum(run["errors"] for run in results[setup])
        print(
            f"| {setup.label} | {result['steps_per_s']:,.0f} | {result['p50_ms']:.1f} | "
            f"{result['p99_ms']:.1f} | {errors} | {ratio} | "
            f"{result['server_us_per_step']:.0f} | {result['client_us_per_step']:.0f} | "
            f"{cpu_ratio} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--openenv-python", default=sys.executable)
    parser.add_argument("--load", choices=["palaestra", "openenv"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--env-id", help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load == "palaestra":
        load = palaestra_load(
            args.url, args.env_id, args.sessions, args.seconds, args.warmup, args.connections
        )
        print(json.dumps(asyncio.run(load)))
        return
    if args.load == "openenv":
        load = openenv_load(args.url, args.sessions, args.seconds, args.warmup)
        print(json.dumps(asyncio.run(load)))
        return
    setups = SETUPS
    if not has_openenv(args.openenv_python):
        print(
            f"skipping OpenEnv: {args.openenv_python} cannot import openenv-core", file=sys.stderr
        )
        setups = [setup for setup in SETUPS if setup.side == "palaestra"]
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as echo_dir:
        Path(echo_dir, "openenv_echo.py").write_text(OPENENV_ECHO)
        results = measure(args, setups, echo_dir)
    report(args, results, (before, os.getloadavg()))


if __name__ == "__main__":
    main()
