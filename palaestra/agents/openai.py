"""An agent backed by any OpenAI-compatible server (vLLM ``serve``, SGLang, Ollama, hosted APIs).

Two modes:

* ``"chat"`` (default) sends the messages to ``/chat/completions``; the server applies the
  chat template. When the env reads the default (``hermes``) tool-call format, its tools go
  out as native ``tools``, earlier calls as structured ``tool_calls`` with ids and their
  results as tool messages with the matching ``tool_call_id``
  (:func:`palaestra.core.messages.to_openai_messages`); native tool calls in the reply are
  written back as ``<tool_call>{...}</tool_call>`` text. Envs with another format (e.g.
  ``<search>`` tags) get plain text both ways: their system prompt says how to call tools.
  When the env continued the assistant's message (Search-R1), the request asks the server
  to continue it (vLLM's and SGLang's ``continue_final_message``).
* ``"completions"`` with a local ``tokenizer`` is token-in, token-out: the runner renders the
  conversation itself and the prompt goes to ``/completions`` as token ids, so the episode's
  token sequence is exact across turns.

With ``token_ids=True`` the request asks vLLM-style servers for the sampled token ids and
logprobs (``return_token_ids``, ``logprobs``); servers that do not know these fields may
reject them, so it is off by default.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx

from palaestra.agents.base import Action, Conversation, Sampling
from palaestra.core.messages import action_text, continues_message, to_openai_messages
from palaestra.core.tool_calls import DEFAULT_FORMAT

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIAgent:
    """Calls an OpenAI-compatible HTTP endpoint; retries transient failures with backoff.

    >>> agent = OpenAIAgent("Qwen/Qwen3-0.6B", "http://localhost:8000/v1")  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        mode: str = "chat",
        tokenizer: Any = None,
        sampling: Sampling | None = None,
        token_ids: bool = False,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        if mode not in ("chat", "completions"):
            raise ValueError(f"mode must be 'chat' or 'completions', got {mode!r}")
        if mode == "completions" and tokenizer is None:
            raise ValueError(
                "completions mode sends token ids and needs the model's tokenizer: pass "
                "tokenizer=<path or tokenizer object>"
            )
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        self.model = model
        self.name = f"openai:{model}"
        self.mode = mode
        self.tokenizer = tokenizer if mode == "completions" else None
        self.sampling = sampling or Sampling()
        self.token_ids = token_ids
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.extra_body = dict(extra_body or {})
        self.base_url = base_url.rstrip("/")
        self._client_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": {"Authorization": f"Bearer {api_key}"} if api_key else {},
            "timeout": timeout_s,
            "limits": httpx.Limits(max_connections=None, max_keepalive_connections=256),
            "transport": transport,
        }
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    async def act(self, conversation: Conversation) -> Action:
        if self.mode == "chat":
            reply = await self._post("/chat/completions", self._chat_body(conversation))
            return parse_chat_choice(reply["choices"][0])
        if conversation.prompt_ids is None:
            raise RuntimeError("completions mode needs Conversation.prompt_ids (run it via Runner)")
        body = self._common_body(conversation) | {"prompt": conversation.prompt_ids}
        reply = await self._post("/completions", body)
        return parse_completion_choice(reply["choices"][0])

    async def aclose(self) -> None:
        """Close the HTTP connections (those of the running event loop; others are dropped)."""
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._client_loop = None

    def _http(self) -> httpx.AsyncClient:
        """The client of the running event loop: connections cannot outlive their loop, and
        each ``Runner.run`` runs its own loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(**self._client_options)
            self._client_loop = loop
        return self._client

    def _common_body(self, conversation: Conversation) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.sampling.tokens_for(conversation),
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
        }
        if self.sampling.stop:
            body["stop"] = self.sampling.stop
        if self.token_ids:
            body["return_token_ids"] = True
            body["logprobs"] = True if self.mode == "chat" else 0
        return body | self.extra_body

    def _chat_body(self, conversation: Conversation) -> dict[str, Any]:
        messages = to_openai_messages(conversation.messages)
        body = self._common_body(conversation) | {"messages": messages}
        if conversation.tools and conversation.tool_format == DEFAULT_FORMAT:
            body["tools"] = conversation.tools
        if continues_message(messages):  # the env continued the assistant's message (vLLM, SGLang)
            body |= {"continue_final_message": True, "add_generation_prompt": False}
        return body

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = await self._http().post(path, json=body)
            except httpx.TransportError:
                if last:
                    raise
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code not in RETRY_STATUS or last:
                    raise RuntimeError(
                        f"{self.base_url}{path} answered {response.status_code}: "
                        f"{response.text[:500]}"
                    )
            await asyncio.sleep(self.backoff_s * 2**attempt * (0.5 + random.random()))
        raise AssertionError("unreachable")


def parse_chat_choice(choice: dict[str, Any]) -> Action:
    """An :class:`Action` from one ``/chat/completions`` choice (reasoning, tool calls, tokens)."""
    text = action_text(choice.get("message") or {})
    entries = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(entry["logprob"]) for entry in entries]
    token_ids = choice.get("token_ids") or _ids_from_token_strings(e.get("token") for e in entries)
    return _action(text, token_ids, logprobs, choice.get("finish_reason"))


def parse_completion_choice(choice: dict[str, Any]) -> Action:
    """An :class:`Action` from one ``/completions`` choice."""
    logprobs_block = choice.get("logprobs") or {}
    logprobs = [float(x) for x in logprobs_block.get("token_logprobs") or [] if x is not None]
    token_ids = choice.get("token_ids") or _ids_from_token_strings(
        logprobs_block.get("tokens") or []
    )
    return _action(choice.get("text") or "", token_ids, logprobs, choice.get("finish_reason"))


def _ids_from_token_strings(tokens: Any) -> list[int]:
    """Ids from vLLM's ``token_id:123`` token strings (``return_tokens_as_token_ids``), else []."""
    ids = []
    for token in tokens:
        if not isinstance(token, str) or not token.startswith("token_id:"):
            return []
        ids.append(int(token.removeprefix("token_id:")))
    return ids


def _action(text: str, token_ids: list[int], logprobs: list[float], finish: Any) -> Action:
    token_ids = [int(t) for t in token_ids]
    if len(logprobs) != len(token_ids):
        logprobs = []
    return Action(text, token_ids, logprobs, finish)
