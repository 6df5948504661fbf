"""Load test: envs served over the network, palaestra vs OpenEnv, on loopback.

Each side serves a trivial echo env from its own server process; a second process opens
``--sessions`` concurrent sessions and steps each as fast as answers come back for
``--seconds`` (after a warm-up), timing every step. Reported: steps/s, p50/p99 step latency
and errors (any failed or timed-out step). palaestra's sessions share one WebSocket
(multiplexed by request id); OpenEnv's client opens one WebSocket per session, as its
``EnvClient`` does. OpenEnv's echo env is the one its ``openenv init`` template generates.

    python benchmarks/bench_serve_vs_openenv.py --openenv-python .venv-openenv/bin/python

``--connections`` spreads palaestra's sessions over that many WebSockets (``--connections
200``: one per session, like OpenEnv). ``--openenv-python`` is an interpreter with ``openenv-core`` installed (default: this one);
the OpenEnv side is skipped when it has none.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ECHO_ID = "bench:Echo-v0"

PALAESTRA_SERVER = f"""
import sys
import palaestra
from palaestra.server import build_server
palaestra.register({ECHO_ID!r}, "palaestra.testing.echo:EchoEnv")
build_server([{ECHO_ID!r}], port=int(sys.argv[1])).run()
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


async def drive(
    sessions: int, step: Callable[[int], Awaitable[object]], seconds: float, warmup: float
) -> dict[str, float]:
    """Step every session in a loop; latencies and errors counted after the warm-up only."""
    latencies: list[float] = []
    errors = 0
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

    await asyncio.gather(*(loop(i) for i in range(sessions)))
    latencies.sort()

    def quantile(q: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return {
        "steps": len(latencies),
        "steps_per_s": len(latencies) / seconds,
        "p50_ms": quantile(0.50),
        "p99_ms": quantile(0.99),
        "errors": errors,
    }


async def palaestra_load(
    url: str, sessions: int, seconds: float, warmup: float, connections: int
) -> dict:
    from palaestra.runner import Task
    from palaestra.runner.network import EnvServerClient

    hosts = [EnvServerClient(url, timeout_s=30) for _ in range(connections)]
    handles = [hosts[i % connections].acquire(Task(ECHO_ID)) for i in range(sessions)]
    await asyncio.gather(*(h.areset(seed=i) for i, h in enumerate(handles)))

    async def step(i: int) -> None:
        obs, *_ = await handles[i].astep("hello")
        if obs != "echo: hello":
            raise AssertionError(f"wrong answer {obs!r}")

    try:
        return await drive(sessions, step, seconds, warmup)
    finally:
        await asyncio.gather(*(host.aclose() for host in hosts))


async def openenv_load(
    url: str, sessions: int, seconds: float, warmup: float, connections: int
) -> dict:
    from openenv_echo import EchoAction, EchoEnv

    assert connections == sessions, "OpenEnv's client has one connection per session"

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


def wait_for_port(port: int, server: subprocess.Popen, timeout_s: float = 60) -> None:
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


def run_side(side: str, python: str, args: argparse.Namespace, echo_dir: str) -> dict | None:
    """Start ``side``'s server, run its load process, stop the server; None if unavailable."""
    if side == "openenv":
        try:
            probe = subprocess.run([python, "-c", "import openenv.core"], capture_output=True)
        except OSError:
            probe = None
        if probe is None or probe.returncode != 0:
            print(f"skipping OpenEnv: {python} cannot import openenv-core", file=sys.stderr)
            return None
    port = free_port()
    if side == "palaestra":
        server_cmd = [python, "-c", PALAESTRA_SERVER, str(port)]
    else:
        server_cmd = [
            python, "-m", "uvicorn", "openenv_echo:app", "--app-dir", echo_dir,
            "--port", str(port), "--log-level", "warning",
        ]  # fmt: skip
    server = subprocess.Popen(server_cmd, cwd=ROOT)
    try:
        wait_for_port(port, server)
        connections = args.sessions if side == "openenv" else args.connections
        load_cmd = [python, __file__, "--load", side, "--url", f"http://127.0.0.1:{port}"]
        for flag, value in [
            ("--sessions", args.sessions),
            ("--seconds", args.seconds),
            ("--warmup", args.warmup),
            ("--connections", connections),
        ]:
            load_cmd += [flag, str(value)]
        load = subprocess.run(
            load_cmd,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{ROOT}:{echo_dir}"},
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(load.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument(
        "--connections",
        type=int,
        default=1,
        help="WebSockets palaestra's sessions share (OpenEnv: one per session)",
    )
    parser.add_argument("--openenv-python", default=sys.executable)
    parser.add_argument("--load", choices=["palaestra", "openenv"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load is not None:
        load = palaestra_load if args.load == "palaestra" else openenv_load
        result = asyncio.run(
            load(args.url, args.sessions, args.seconds, args.warmup, args.connections)
        )
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as echo_dir:
        Path(echo_dir, "openenv_echo.py").write_text(OPENENV_ECHO)
        results = {
            "palaestra": run_side("palaestra", sys.executable, args, echo_dir),
            "openenv": run_side("openenv", args.openenv_python, args, echo_dir),
        }
    print(
        f"{args.sessions} sessions, {args.seconds:g} s, echo env, loopback; "
        f"palaestra over {args.connections} connection(s), OpenEnv over {args.sessions}"
    )
    print(f"{'server':<10} {'steps/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for side, result in results.items():
        if result is not None:
            print(
                f"{side:<10} {result['steps_per_s']:>9,.0f} {result['p50_ms']:>8.1f} "
                f"{result['p99_ms']:>8.1f} {result['errors']:>7}"
            )
    if all(results.values()):
        ratio = results["palaestra"]["steps_per_s"] / results["openenv"]["steps_per_s"]
        print(f"palaestra / OpenEnv steps/s: {ratio:.1f}x")


if __name__ == "__main__":
    main()
