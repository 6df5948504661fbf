"""A tiny OpenAI-compatible HTTP server on localhost that plays guess-the-number by binary search.

It speaks ``/v1/chat/completions`` like ``vllm serve`` does, so tests can run the HTTP agent and
``palaestra eval`` end to end without a model.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def binary_search_reply(messages: list[dict]) -> str:
    """The next guess, read off the conversation."""
    task = next(m["content"] for m in messages if m["role"] == "user")
    low, high = (int(x) for x in re.search(r"between (\d+) and (\d+)", task).groups())
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i + 1 >= len(messages):
            continue
        guess = int(re.search(r"\\boxed\{(\d+)\}", message["content"]).group(1))
        feedback = messages[i + 1]["content"]
        if "higher" in feedback:
            low = guess + 1
        elif "lower" in feedback:
            high = guess - 1
    return "Halving the interval. \\boxed{" + str((low + high) // 2) + "}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body))
        if self.server.failures_left > 0:
            self.server.failures_left -= 1
            self._send(503, {"error": "overloaded"})
            return
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": f"no route {self.path}"})
            return
        text = binary_search_reply(body["messages"])
        self._send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # keep test output clean
        pass


class StubServer:
    """Context manager: serves on 127.0.0.1 (a free port) in a thread; ``url`` ends in ``/v1``."""

    def __init__(self, failures: int = 0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.requests = []
        self.httpd.failures_left = failures
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def __enter__(self) -> StubServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
