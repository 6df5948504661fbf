"""Retrieval server under load, side by side with a Search-R1-style server, and BM25 quality.

Two servers over the same BM25 index (the synthetic world of seed 0), each in its own
process: ``palaestra serve-retriever``, and a reference written the way Search-R1's
``retrieval_server.py`` serves (FastAPI, a pydantic request model, a synchronous endpoint
that returns dicts). They run in alternation (``--rounds`` each), so machine load hits both
alike. In each run 50 concurrent clients on loopback (one asyncio loop, one
:class:`RemoteRetriever` pool) each send ``--requests`` Search-R1 requests of one question
(top 3, with scores); the script prints p50/p99 latency, throughput, the server's CPU time
per request, and the latency of one request carrying a whole Search-R1 GRPO step (2560
queries). It also prints BM25 recall@5 on single-hop questions. Run from the repo root::

    python benchmarks/retriever_server.py --clients 50 --requests 20 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

import httpx
import pydantic

from palaestra.envs.search.questions import make_question
from palaestra.envs.search.world import build_world
from palaestra.tools.search import BM25Retriever, RemoteRetriever

GRPO_STEP_QUERIES = 2560
"""Search-R1's GRPO script: 512 prompts x 5 samples, all searches of a step in one request."""


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QueryRequest(pydantic.BaseModel):
    """Search-R1's request model."""

    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


def serve_reference(port: int) -> None:
    """A Search-R1-style server: pydantic model, sync endpoint, dict results."""
    import uvicorn
    from fastapi import FastAPI

    retriever = BM25Retriever(build_world(0).docs)
    app = FastAPI()

    @app.post("/retrieve")
    def retrieve(request: QueryRequest) -> dict:
        rows = retriever.search_many(request.queries, request.topk or 3)
        return {
            "result": [
                [{"document": {"id": d.id, "contents": d.contents}, "score": d.score} for d in row]
                for row in rows
            ]
        }

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


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
                assert len(hits) == 3, query
            except Exception:
                failures += 1
                continue
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(client(i) for i in range(clients)))
    await retriever.aclose()
    return latencies, failures


def start(kind: str, port: int) -> subprocess.Popen:
    if kind == "palaestra":
        command = [sys.executable, "-m", "palaestra.cli", "serve-retriever", "--port", str(port)]
    else:
        command = [sys.executable, __file__, "--serve-reference", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    wait_ready(f"http://127.0.0.1:{port}/health")
    return server


def one_run(kind: str, texts: list[str], args: argparse.Namespace) -> dict[str, float]:
    """Load one freshly started server; its latencies, throughput and CPU per request."""
    port = free_port()
    server = start(kind, port)
    url = f"http://127.0.0.1:{port}/retrieve"
    try:
        cpu_before, started = cpu_seconds(server.pid), time.perf_counter()
        latencies, failures = asyncio.run(load(url, texts, args.clients, args.requests))
        wall = time.perf_counter() - started
        cpu = cpu_seconds(server.pid) - cpu_before
        batch_start = time.perf_counter()
        body = {"queries": texts[:GRPO_STEP_QUERIES], "topk": 3, "return_scores": True}
        answer = httpx.post(url, json=body, timeout=120.0)
        batch = time.perf_counter() - batch_start
        assert answer.status_code == 200 and len(answer.json()["result"]) == GRPO_STEP_QUERIES
    finally:
        server.terminate()
        server.wait()
    return {
        "answered": len(latencies),
        "failed": failures,
        "p50": percentile(latencies, 0.5) * 1e3,
        "p99": percentile(latencies, 0.99) * 1e3,
        "mean": statistics.mean(latencies) * 1e3,
        "rps": len(latencies) / wall,
        "cpu_ms": cpu / len(latencies) * 1e3,
        "batch_s": batch,
    }


def print_quality(world, questions: int) -> None:
    retriever = BM25Retriever(world.docs)
    single = [make_question(world, i, "single-hop") for i in range(questions)]
    start_time = time.perf_counter()
    hits = sum(q.evidence[0] in [d.id for d in retriever.search(q.text, 5)] for q in single)
    per_search = (time.perf_counter() - start_time) / len(single)
    print(f"documents: {len(world.docs)}")
    print(f"BM25 recall@5, single-hop: {hits / len(single):.3f} ({hits}/{len(single)})")
    print(f"in-process search (k=5): {per_search * 1e3:.2f} ms per query")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each server")
    parser.add_argument("--questions", type=int, default=500, help="single-hop, for recall")
    parser.add_argument("--serve-reference", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_reference:
        serve_reference(args.serve_reference)
        return
    print(f"load average at the start: {os.getloadavg()}")
    world = build_world(0)
    print_quality(world, args.questions)
    texts = [make_question(world, i).text for i in range(max(GRPO_STEP_QUERIES, 1000))]
    runs: dict[str, list[dict[str, float]]] = {"palaestra": [], "search-r1-style": []}
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(one_run(kind, texts, args))
    total = args.clients * args.requests
    for kind, results in runs.items():
        print(f"{kind}: {args.clients} clients x {args.requests} requests, {args.rounds} runs")
        for r in results:
            print(
                f"  answered {r['answered']}/{total}, p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms,"
                f" {r['rps']:.0f} requests/s, server CPU {r['cpu_ms']:.2f} ms/request,"
                f" {GRPO_STEP_QUERIES} queries in one request {r['batch_s']:.2f} s"
            )
    medians = {
        kind: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for kind, results in runs.items()
    }
    ours, theirs = medians["palaestra"], medians["search-r1-style"]
    print(
        f"median ratios palaestra / search-r1-style: p50 {ours['p50'] / theirs['p50']:.2f}, "
        f"p99 {ours['p99'] / theirs['p99']:.2f}, server CPU per request "
        f"{ours['cpu_ms'] / theirs['cpu_ms']:.2f}, batch {ours['batch_s'] / theirs['batch_s']:.2f}"
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
