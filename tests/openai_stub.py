"""A tiny OpenAI-compatible HTTP server on localhost that plays guess-the-number by binary search,
or (``tools=True``) arithmetic with the python tool.

It speaks ``/v1/chat/completions`` like ``vllm serve`` does, so tests can run the HTTP agent and
``palaestra eval`` end to end without a model. In tool mode it is as strict as OpenAI's API: a
tool message must answer a call of the assistant message before it, by ``tool_call_id``.
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


def tool_protocol_error(messages: list[dict]) -> str | None:
    """What OpenAI's API would reject in ``messages`` (tool messages without their call)."""
    unanswered: list[str] = []
    for message in messages:
        if message["role"] == "assistant":
            unanswered = [call["id"] for call in message.get("tool_calls") or []]
        elif message["role"] == "tool":
            if message.get("tool_call_id") not in unanswered:
                return f"tool message with tool_call_id {message.get('tool_call_id')!r} answers no call"
            unanswered.remove(message["tool_call_id"])
        elif unanswered:
            return f"tool calls {unanswered} were not answered"
    return None


def python_tool_reply(messages: list[dict]) -> dict:
    """Call the python tool on the task's expression, then answer with the tool's output."""
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": "\\boxed{" + messages[-1]["content"].strip() + "}"}
    task = next(m["content"] for m in messages if m["role"] == "user")
    expression = re.search(r"Compute (.+)\.$", task).group(1)
    call = {
        "id": f"call_{len(messages)}",
        "type": "function",
        "function": {"name": "python", "arguments": json.dumps({"code": f"print({expression})"})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


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
        if self.server.tools:
            error = tool_protocol_error(body["messages"])
            if error is not None:
                self._send(400, {"error": error})
                return
            message = python_tool_reply(body["messages"])
        else:
            message = {"role": "assistant", "content": binary_search_reply(body["messages"])}
        self._send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
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

    def __init__(self, failures: int = 0, *, tools: bool = False):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.requests = []
        self.httpd.tools = tools
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
