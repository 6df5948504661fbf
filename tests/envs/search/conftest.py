"""Fixtures of the search tests: the synthetic world, its index, a live retrieval server."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("bm25s", reason="the search tests need the 'search' extra")

from palaestra.envs.search.world import World, build_world
from palaestra.tools.search import BM25Retriever


@pytest.fixture(scope="session")
def world() -> World:
    return build_world(0)


@pytest.fixture(scope="session")
def bm25(world: World) -> BM25Retriever:
    return BM25Retriever(world.docs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """The retrieval server (with its connection guards) in a thread on a free loopback port."""

    def __init__(self, retriever, **options):
        pytest.importorskip("uvicorn")
        from palaestra.server.retriever import build_retriever_server

        self.port = free_port()
        self.server = build_retriever_server(
            retriever, port=self.port, log_level="error", **options
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/retrieve"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join()


@pytest.fixture(scope="session")
def server_url(bm25: BM25Retriever):
    with LiveServer(bm25) as live:
        yield live.url
