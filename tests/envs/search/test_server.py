"""The retrieval server speaks Search-R1's API; the client survives slow and failing servers."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

import palaestra
from palaestra.server.retriever import RetrieverLimits, check_binding
from palaestra.tools.search import Doc, RemoteRetriever, Retriever, RetrieverError, SearchTool
from tests.envs.search.conftest import LiveServer


def test_response_shape_is_search_r1s(server_url, bm25):
    body = {"queries": ["Lantern of Orinaes", "zzzz"], "topk": 3, "return_scores": True}
    result = httpx.post(server_url, json=body).json()["result"]
    expected = bm25.search("Lantern of Orinaes", 3)
    assert result[0] == [
        {
            "document": {"id": d.id, "contents": f'"{d.title}"\n{d.text}'},
            "score": pytest.approx(d.score),
        }
        for d in expected
    ]
    assert [item["score"] for item in result[1]] == [0.0] * 3  # no word matches: still topk
    plain = httpx.post(server_url, json={**body, "return_scores": False}).json()["result"]
    assert plain[0] == [item["document"] for item in result[0]]


def test_client_round_trip(server_url, bm25):
    client = RemoteRetriever(server_url)
    assert [d.id for d in client.search("Lantern of Orinaes", 3)] == [
        d.id for d in bm25.search("Lantern of Orinaes", 3)
    ]
    assert asyncio.run(client.asearch("Lantern of Orinaes", 2))[0].title == "The Lantern of Orinaes"
    assert len(client.search("a" * (1 << 20), 3)) == 3  # 1 MB query: cut by the client
    assert len(client.search_many(["x"], 1000)) == 1 and len(client.search("x", 1000)) == 1000


@pytest.mark.parametrize("topk", [None, 0])
def test_topk_null_or_zero_is_the_default(bm25, topk):
    with LiveServer(bm25, topk=5) as live:
        body = {"queries": ["Lantern of Orinaes"], "topk": topk, "return_scores": True}
        assert len(httpx.post(live.url, json=body).json()["result"][0]) == 5
        assert len(httpx.post(live.url, json={"queries": ["x"]}).json()["result"][0]) == 5


@pytest.mark.parametrize(("topk", "scores"), [("3", "yes"), (3.0, 1), (" 3 ", "true")])
def test_fields_are_coerced_as_search_r1s_server_does(server_url, topk, scores):
    body = {"queries": ["Lantern of Orinaes"], "topk": topk, "return_scores": scores}
    response = httpx.post(server_url, json=body)
    assert response.status_code == 200
    (row,) = response.json()["result"]
    assert len(row) == 3 and all("score" in item for item in row)


def test_every_query_gets_topk_documents(server_url):
    queries = ["", "the of a", "zzzz qqqq", "\x00", "Lantern"]
    rows = httpx.post(server_url, json={"queries": queries, "topk": 4}).json()["result"]
    assert [len(row) for row in rows] == [4] * len(queries)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"queries": "x"}, "'queries'"),
        ({"queries": [1, 2]}, "'queries'"),
        ({"queries": ["x"], "topk": -1}, "'topk'"),
        ({"queries": ["x"], "topk": "three"}, "'topk'"),
        ({"queries": ["x"], "topk": 2.5}, "'topk'"),
        ({"queries": ["x"], "return_scores": "maybe"}, "'return_scores'"),
        ({"queries": ["x", 3]}, "'queries'"),
        (["x"], "JSON object"),
    ],
)
def test_bad_requests_are_refused_with_a_short_message(server_url, body, field):
    response = httpx.post(server_url, json=body)
    assert response.status_code == 422 and field in response.json()["detail"]


def test_errors_never_repeat_the_request(server_url):
    marker = "UNIQUE-MARKER-" + "x" * 20
    too_many = {"queries": [f"{marker}{i}" for i in range(10_000)], "topk": 3}
    response = httpx.post(server_url, json=too_many)
    assert response.status_code == 422
    assert "10000 queries in one request" in response.json()["detail"]
    assert marker not in response.text and len(response.content) < 300
    garbage = httpx.post(server_url, content=b"{" + marker.encode() * 1000)
    assert garbage.status_code == 422 and marker not in garbage.text
    deep = httpx.post(server_url, content=b"[" * 100_000 + b"]" * 100_000)
    assert deep.status_code == 422 and deep.json()["detail"] == "the body is not JSON"


def test_the_query_and_document_caps_are_configurable(bm25):
    limits = RetrieverLimits(max_queries=10, max_documents=20)
    with LiveServer(bm25, limits=limits) as live:
        assert httpx.post(live.url, json={"queries": ["x"] * 10, "topk": 2}).status_code == 200
        refused = httpx.post(live.url, json={"queries": ["x"] * 11, "topk": 1})
        assert refused.status_code == 422 and "--max-queries" in refused.json()["detail"]
        refused = httpx.post(live.url, json={"queries": ["x"] * 10, "topk": 3})
        assert refused.status_code == 422 and "--max-documents" in refused.json()["detail"]


def test_large_bodies_are_refused_before_they_are_read(bm25):
    with LiveServer(bm25, limits=RetrieverLimits(max_body_bytes=1000)) as live:
        small = {"queries": ["Lantern"] * 50}
        assert httpx.post(live.url, json=small).status_code == 200
        big = json.dumps({"queries": ["Lantern"] * 200}).encode()
        assert httpx.post(live.url, content=big).status_code == 413

        def chunks():  # no Content-Length: the server counts as it reads
            yield b'{"queries": ['
            for _ in range(500):
                yield b'"Lantern",'
            yield b'"x"]}'

        response = httpx.post(live.url, content=chunks())
        assert response.status_code == 413 and "1000 bytes" in response.json()["detail"]
        with socket.create_connection(("127.0.0.1", live.port)) as sock:
            sock.sendall(  # a declared 1 GB body is refused at once, nothing read
                b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000\r\n\r\n"
            )
            sock.settimeout(10)
            assert sock.recv(100).startswith(b"HTTP/1.1 413")


def _closed_by_server(sock: socket.socket, trickle: bytes = b"") -> bool:
    """Whether the server closes ``sock`` while ``trickle`` is sent a byte at a time."""
    sock.settimeout(0.05)
    for _ in range(400):  # up to 20 s
        try:
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            pass
        except ConnectionResetError:
            return True
        if trickle:
            try:
                sock.sendall(trickle[:1])
            except OSError:
                return True
            trickle = trickle[1:] or b"X"
    return False


def test_slow_and_idle_connections_are_closed(bm25):
    with LiveServer(bm25, limits=RetrieverLimits(request_timeout_s=0.5)) as live:
        address = ("127.0.0.1", live.port)
        with socket.create_connection(address) as idle:
            assert _closed_by_server(idle)
        with socket.create_connection(address) as slow_headers:
            assert _closed_by_server(slow_headers, b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
        with socket.create_connection(address) as slow_body:
            slow_body.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n")
            assert _closed_by_server(slow_body, b'{"queries": ["x"')
        client = httpx.Client()  # a keep-alive connection still serves request after request
        for _ in range(3):
            assert client.post(live.url, json={"queries": ["Lantern"]}).status_code == 200
        client.close()


class Slow(Retriever):
    def search_many(self, queries, k):
        time.sleep(1.0)
        return [[Doc("1", "T", "text")] for _ in queries]


def test_a_slow_answer_is_not_cut_by_the_request_deadline():
    with LiveServer(Slow(), limits=RetrieverLimits(request_timeout_s=0.3)) as live:
        response = httpx.post(live.url, json={"queries": ["x"] * 20}, timeout=10)
        assert response.status_code == 200 and len(response.json()["result"]) == 20


def test_a_token_is_required_when_set(bm25):
    with LiveServer(bm25, token="s3cret") as live:
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
    assert info["role"] == "assistant" and observation.startswith('\n\n<information>Doc 1(Title: "')
    while not terminated:
        observation, reward, terminated, _, info = env.step(policy(observation))
    assert reward == 1.0 and info["success"]


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
    assert observation == (
        '\n\n<information>Doc 1(Title: "Made up") A document the engine wrote.</information>\n\n'
    )
