"""Retrieval server under load, and BM25 quality on the synthetic knowledge base.

Starts ``palaestra serve-retriever`` (BM25 over the synthetic world of seed 0) in its own
process, then 50 concurrent clients on loopback each send ``--requests`` Search-R1 requests
(one question, top 3, with scores) through :class:`RemoteRetriever`; prints p50/p99 latency,
throughput and failures. Also prints BM25 recall@5 on single-hop questions and the in-process
search latency. Run from the repo root::

    python benchmarks/retriever_server.py --clients 50 --requests 20
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time

import httpx

from palaestra.envs.search.questions import make_question
from palaestra.envs.search.world import build_world
from palaestra.tools.search import BM25Retriever, RemoteRetriever


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"server at {url} did not come up")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def load(
    url: str, questions: list[str], clients: int, requests: int
) -> tuple[list[float], int]:
    """``clients`` concurrent clients (one connection pool) each send ``requests`` requests."""
    latencies: list[float] = []
    failures = 0
    retriever = RemoteRetriever(url, timeout=30.0, retries=0)

    async def client(index: int) -> None:
        nonlocal failures
        for n in range(requests):
            query = questions[(index * requests + n) % len(questions)]
            start = time.perf_counter()
            try:
                hits = await retriever.asearch(query, 3)
                assert hits, query
            except Exception:
                failures += 1
                continue
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(client(i) for i in range(clients)))
    await retriever.aclose()
    return latencies, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument(
        "--questions", type=int, default=500, help="single-hop questions for recall"
    )
    args = parser.parse_args()

    world = build_world(0)
    retriever = BM25Retriever(world.docs)
    single = [make_question(world, i, "single-hop") for i in range(args.questions)]
    start = time.perf_counter()
    hits = sum(q.evidence[0] in [d.id for d in retriever.search(q.text, 5)] for q in single)
    per_search = (time.perf_counter() - start) / len(single)
    print(f"documents: {len(world.docs)}")
    print(f"BM25 recall@5, single-hop: {hits / len(single):.3f} ({hits}/{len(single)})")
    print(f"in-process search (k=5): {per_search * 1e3:.2f} ms per query")

    port = free_port()
    command = [sys.executable, "-m", "palaestra.cli", "serve-retriever", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}/health")
        texts = [make_question(world, i).text for i in range(1000)]
        start = time.perf_counter()
        latencies, failures = asyncio.run(
            load(f"http://127.0.0.1:{port}/retrieve", texts, args.clients, args.requests)
        )
        wall = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait()
    total = args.clients * args.requests
    print(f"{args.clients} clients x {args.requests} requests: {total - failures}/{total} answered")
    print(
        f"latency p50 {percentile(latencies, 0.5) * 1e3:.1f} ms, p99 "
        f"{percentile(latencies, 0.99) * 1e3:.1f} ms, mean {statistics.mean(latencies) * 1e3:.1f} ms; "
        f"{len(latencies) / wall:.0f} requests/s"
    )


if __name__ == "__main__":
    main()
