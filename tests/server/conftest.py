"""Fixtures: an env server on a free loopback port, run in a thread of the test process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest

import palaestra
from palaestra.core import deregister
from palaestra.server import serving
from tests.conftest import child_env
from tests.server.served_envs import SERVED_TEST_ENVS


@contextmanager
def running_server(port: int = 0, **options) -> Iterator[str]:
    """Serve in a thread; yields the server's URL and stops it on exit (skips the test when
    the ``serve`` extra is missing)."""
    for module in ("fastapi", "uvicorn", "websockets"):
        pytest.importorskip(module, reason="the env server needs the 'serve' extra")
    with serving(port=port, **options) as url:
        yield url


def metric(url: str, name: str) -> float:
    """One sample of the server's ``/metrics``, by its name with labels."""
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


@pytest.fixture
def env_server() -> Iterator[str]:
    with running_server() as url:
        yield url


@pytest.fixture(scope="module", autouse=True)
def served_test_envs() -> Iterator[None]:
    for env_id, entry in SERVED_TEST_ENVS.items():
        palaestra.register(env_id, entry, override=True)
    yield
    for env_id in SERVED_TEST_ENVS:
        deregister(env_id)


def wait_for(condition, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds (fails the test after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@asynccontextmanager
async def raw_socket(url: str, **options) -> AsyncIterator:
    """A WebSocket to the server's sessions endpoint, for speaking the protocol by hand."""
    from websockets.asyncio.client import connect

    async with connect(url.replace("http", "ws", 1) + "/sessions", **options) as ws:
        yield ws


async def read_answers(ws, count: int) -> list[dict]:
    """The next ``count`` answers, in the order they arrive."""
    answers: list[dict] = []
    while len(answers) < count:
        answers += json.loads(await ws.recv())
    return answers


SERVER_PROCESS = """
import sys
from palaestra.server import build_server
from tests.trainers.letter_env import register_once

register_once()
build_server(port=int(sys.argv[1])).run()
"""


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server_process(port: int) -> subprocess.Popen:
    """``palaestra serve`` in a child process on ``port`` (every registered id, and the
    trainer tests' letter env), once its ``/health`` answers: a server a test can SIGKILL."""
    for module in ("fastapi", "uvicorn", "websockets"):
        pytest.importorskip(module, reason="the env server needs the 'serve' extra")
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_PROCESS, str(port)], env=child_env(), stderr=subprocess.PIPE
    )

    def healthy() -> bool:
        assert server.poll() is None, server.stderr.read().decode()[-2000:]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        except httpx.TransportError:
            return False

    wait_for(healthy, timeout_s=60)
    return server


def kill(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` and reap it."""
    process.kill()
    process.wait()
