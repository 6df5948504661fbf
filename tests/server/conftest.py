"""Fixtures: an env server on a free loopback port, run in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from palaestra.server import build_server


@contextmanager
def running_server(port: int = 0, **options) -> Iterator[str]:
    """Serve in a thread; yields the server's URL and stops it on exit (skips the test when
    the ``serve`` extra is missing)."""
    for module in ("fastapi", "uvicorn", "websockets"):
        pytest.importorskip(module, reason="the env server needs the 'serve' extra")
    server = build_server(port=port, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the env server did not start")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join()


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
