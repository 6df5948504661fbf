"""Start a ``vllm serve`` for a test and stop it afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from palaestra.agents.vllm import serve_command

START_TIMEOUT_S = 240


@contextmanager
def vllm_server(model_dir: str, **engine_options: Any) -> Iterator[str]:
    """A ``vllm serve`` of ``model_dir`` as :func:`serve_command` starts it; yields its root URL."""
    port = _free_port()
    argv, env = serve_command(model_dir, port=port, **engine_options)
    argv = [sys.executable, *argv[1:]]  # this interpreter's vLLM
    server = subprocess.Popen(
        argv, env=os.environ | env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(server, url)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


def _wait_until_up(server: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert server.poll() is None, "vllm serve exited during start-up"
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(1)
    pytest.fail(f"vllm serve did not come up within {START_TIMEOUT_S} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
