"""The retrieval server speaks Search-R1's API; the client survives slow and failing servers."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

import palaestra
from palaestra.server.retriever import check_binding, create_app
from palaestra.tools.search import Doc, RemoteRetriever, RetrieverError, SearchTool
from tests.envs.search.conftest import LiveServer


def test_response_shape_is_search_r1s(server_url, bm25):
    body = {"queries": ["Lantern of Orinaes", "zzzz"], "topk": 3, "return_scores": True}
    result = httpx.post(server_url, json=body).json()["result"]
    assert len(result) == 2 and result[1] == []
    expected = bm25.search("Lantern of Orinaes", 3)
    assert result[0] == [
        {
            "document": {"id": d.id, "contents": f'"{d.title}"\n{d.text}'},
            "score": pytest.approx(d.score),
        }
        for d in expected
    ]
    plain = httpx.post(server_url, json={**body, "return_scores": False}).json()["result"]
    assert plain[0] == [item["document"] for item in result[0]]


def test_client_round_trip(server_url, bm25):
    client = RemoteRetriever(server_url)
    assert [d.id for d in client.search("Lantern of Orinaes", 3)] == [
        d.id for d in bm25.search("Lantern of Orinaes", 3)
    ]
    assert asyncio.run(client.asearch("Lantern of Orinaes", 2))[0].title == "The Lantern of Orinaes"
    assert client.search("a" * (1 << 20), 3) == []  # 1 MB query: cut by the client


def test_bad_requests_are_rejected(server_url):
    assert httpx.post(server_url, json={"queries": ["x"], "topk": 0}).status_code == 422
    assert httpx.post(server_url, json={"queries": "x"}).status_code == 422
    with pytest.raises(RetrieverError, match="HTTP 422"):
        RemoteRetriever(server_url).search_many(["x"], 1000)


def test_a_token_is_required_when_set(bm25):
    with LiveServer(create_app(bm25, token="s3cret")) as live:
        assert httpx.post(live.url, json={"queries": ["x"]}).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.post(live.url, json={"queries": ["x"]}, headers=wrong).status_code == 401
        assert RemoteRetriever(live.url, token="s3cret").search("Lantern", 1)


def test_binding_beyond_loopback_needs_a_token():
    check_binding("127.0.0.1", None)
    check_binding("::1", None)
    with pytest.raises(ValueError, match="bearer token"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", "t")


def test_fifty_concurrent_clients_are_all_answered(server_url):
    """50 requests in flight at once on loopback (one connection each); all answered."""
    retriever = RemoteRetriever(server_url, timeout=60)

    async def main() -> list[int]:
        queries = [f"In what year was the Lantern of Orinaes completed {i}" for i in range(50)]
        results = await asyncio.gather(*(retriever.asearch(q, 3) for q in queries))
        await retriever.aclose()
        return [len(hits) for hits in results]

    assert asyncio.run(main()) == [3] * 50


class Flaky:
    """A stub server that fails ``failures`` times (503, or by stalling), then answers."""

    def __init__(self, failures: int, stall: float = 0.0):
        self.calls = 0
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                flaky.calls += 1
                if flaky.calls <= failures:
                    if stall:
                        threading.Event().wait(stall)
                    self.send_response(503)
                    self.end_headers()
                    return
                body = b'{"result": [[{"document": {"id": "1", "contents": "\\"T\\"\\ntext"}, "score": 2.0}]]}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self):
        self.http.shutdown()
        self.http.server_close()


def test_retries_with_backoff_then_succeeds():
    flaky = Flaky(failures=2)
    try:
        retriever = RemoteRetriever(flaky.url, retries=2, backoff=0.01)
        assert retriever.search("q", 1) == [Doc("1", "T", "text", 2.0)]
        assert flaky.calls == 3
        flaky.calls = 0
        assert asyncio.run(retriever.asearch("q", 1)) == [Doc("1", "T", "text", 2.0)]
    finally:
        flaky.close()


def test_a_server_that_stays_down_is_an_observation():
    flaky = Flaky(failures=100)
    try:
        tool = SearchTool(RemoteRetriever(flaky.url, retries=1, backoff=0.01))
        out = tool.call({"query": "q"})
        assert (
            out.startswith("error: search failed: RetrieverError")
            and "failed 2 times (HTTP 503)" in out
        )
    finally:
        flaky.close()


def test_a_slow_server_times_out():
    flaky = Flaky(failures=100, stall=0.3)
    try:
        retriever = RemoteRetriever(flaky.url, timeout=0.05, retries=1, backoff=0.0)
        with pytest.raises(RetrieverError, match="ReadTimeout"):
            retriever.search("q", 1)
    finally:
        flaky.close()


def test_nobody_listening_is_an_observation():
    from tests.envs.search.conftest import free_port

    tool = SearchTool(RemoteRetriever(f"http://127.0.0.1:{free_port()}", retries=0))
    assert tool.call({"query": "q"}).startswith("error: search failed: RetrieverError")


def test_env_searches_through_a_server(server_url):
    env = palaestra.make("search:Synthetic-SearchR1-v0", retriever=server_url)
    observation, _ = env.reset(seed=4)
    policy = env.oracle()
    observation, reward, terminated, _, info = env.step(policy(observation))
    assert info["role"] == "tool" and observation.startswith("<information>Doc 1(Title:")
    _, reward, terminated, _, info = env.step(policy(observation))
    assert terminated and reward == 1.0 and info["success"]


def test_cli_refuses_to_serve_beyond_loopback_without_a_token(monkeypatch):
    from typer.testing import CliRunner

    from palaestra.cli import app

    monkeypatch.delenv("PALAESTRA_RETRIEVER_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve-retriever", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "set a bearer token" in result.output


def test_env_with_a_simulated_engine():
    from palaestra.agents import PolicyAgent

    engine = PolicyAgent(lambda prompt: "Title: Made up\nA document the engine wrote.")
    env = palaestra.make(
        "search:Synthetic-SearchR1-v0", retriever={"kind": "simulated", "agent": engine}
    )
    env.reset(seed=0)
    observation, *_ = env.step("<search>anything</search>")
    assert (
        observation
        == "<information>Doc 1(Title: Made up) A document the engine wrote.</information>"
    )
