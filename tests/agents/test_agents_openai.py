"""The OpenAI-compatible HTTP agent: request shape, parsing, retries, token-in/token-out."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from palaestra.agents import Conversation, make_agent
from palaestra.agents.base import Sampling
from palaestra.agents.openai import OpenAIAgent, parse_chat_choice, parse_completion_choice
from palaestra.runner import Runner, make_tasks
from tests.openai_stub import StubServer

MESSAGES = [{"role": "user", "content": "I am thinking of an integer between 1 and 50."}]


def mock_agent(handler, **kwargs) -> OpenAIAgent:
    return OpenAIAgent(
        "m", "http://test/v1", transport=httpx.MockTransport(handler), backoff_s=0.001, **kwargs
    )


def chat_reply(content: str, **choice) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": content}, **choice}]}


def test_chat_request_carries_messages_tools_and_sampling():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, json=chat_reply("\\boxed{25}", finish_reason="stop"))

    agent = mock_agent(handler, sampling=Sampling(max_tokens=7, temperature=0.5))
    tools = [{"type": "function", "function": {"name": "python", "parameters": {}}}]
    action = asyncio.run(agent.act(Conversation(MESSAGES, tools=tools)))
    assert action.text == "\\boxed{25}" and action.finish_reason == "stop"
    path, body = seen[0]
    assert path == "/v1/chat/completions"
    assert body["messages"] == MESSAGES and body["tools"] == tools
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("m", 7, 0.5)
    assert "return_token_ids" not in body  # hosted APIs reject unknown fields


def test_the_request_asks_for_no_more_tokens_than_the_budget_leaves():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=chat_reply("x", finish_reason="length"))

    agent = mock_agent(handler, sampling=Sampling(max_tokens=64))
    conversation = Conversation(MESSAGES)
    asyncio.run(agent.act(conversation))
    conversation.max_tokens = 9
    asyncio.run(agent.act(conversation))
    assert [body["max_tokens"] for body in seen] == [64, 9]


def test_a_continued_assistant_message_is_continued_not_answered():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=chat_reply("<answer>x</answer>"))

    agent = mock_agent(handler)
    asyncio.run(agent.act(Conversation(MESSAGES)))
    continued = [*MESSAGES, {"role": "assistant", "content": "<search>q</search><information>"}]
    asyncio.run(agent.act(Conversation(continued)))
    assert "continue_final_message" not in seen[0]
    assert seen[1]["messages"] == continued
    assert seen[1]["continue_final_message"] is True and seen[1]["add_generation_prompt"] is False


def test_transient_failures_are_retried_and_permanent_ones_explained():
    statuses = iter([503, 429, 200])

    def flaky(request: httpx.Request) -> httpx.Response:
        status = next(statuses)
        return httpx.Response(status, json=chat_reply("ok") if status == 200 else {"e": 1})

    assert asyncio.run(mock_agent(flaky).act(Conversation(MESSAGES))).text == "ok"

    calls = 0

    def bad_request(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, text="model 'm' does not exist")

    with pytest.raises(RuntimeError, match=r"answered 400: model 'm' does not exist"):
        asyncio.run(mock_agent(bad_request).act(Conversation(MESSAGES)))
    assert calls == 1

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(mock_agent(down, max_retries=2).act(Conversation(MESSAGES)))


def test_parse_chat_choice_reads_tokens_reasoning_and_tool_calls():
    choice = {
        "message": {
            "content": "done",
            "reasoning_content": "think",
            "tool_calls": [{"function": {"name": "python", "arguments": '{"code": "1+1"}'}}],
        },
        "logprobs": {
            "content": [
                {"token": "token_id:5", "logprob": -0.1},
                {"token": "token_id:9", "logprob": -0.2},
            ]
        },
        "finish_reason": "tool_calls",
    }
    action = parse_chat_choice(choice)
    assert action.text == (
        '<think>think</think>done<tool_call>{"name": "python", "arguments": {"code": "1+1"}}</tool_call>'
    )
    assert action.token_ids == [5, 9] and action.logprobs == [-0.1, -0.2]
    explicit = parse_chat_choice({**choice, "token_ids": [7, 8]})
    assert explicit.token_ids == [7, 8]


def test_parse_completion_choice_drops_logprobs_that_do_not_match_the_ids():
    choice = {"text": "x", "token_ids": [1, 2, 3], "logprobs": {"token_logprobs": [-1.0, -2.0]}}
    action = parse_completion_choice(choice)
    assert action.token_ids == [1, 2, 3] and action.logprobs == []


def test_completions_mode_is_token_in_token_out(qwen25_tokenizer):
    prompts = []
    reply_ids = qwen25_tokenizer.encode("\\boxed{25}<|im_end|>", add_special_tokens=False)

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        prompts.append(body["prompt"])
        choice = {
            "text": "\\boxed{25}",
            "token_ids": reply_ids,
            "logprobs": {"token_logprobs": [-0.5] * len(reply_ids)},
            "finish_reason": "stop",
        }
        return httpx.Response(200, json={"choices": [choice]})

    agent = mock_agent(handler, mode="completions", tokenizer=qwen25_tokenizer, token_ids=True)
    (episode,) = Runner(agent, max_turns=2).run(make_tasks(["game:GuessTheNumber-v0"], [1]))
    assert len(prompts) == 2
    assert all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompts)
    assert episode.token_ids[: len(prompts[1])] == prompts[1]
    assert episode.token_ids[len(prompts[1]) :] == reply_ids
    assert episode.logprobs[-len(reply_ids) :] == [-0.5] * len(reply_ids)


def test_completions_mode_needs_a_tokenizer():
    with pytest.raises(ValueError, match="needs the model's tokenizer"):
        OpenAIAgent("m", "http://x/v1", mode="completions")


def test_http_agent_against_a_local_server_with_retries():
    with StubServer(failures=2) as server:
        agent = make_agent(f"openai:stub-model@{server.url}", backoff_s=0.001)
        episodes = Runner(agent, concurrency=4).run(
            make_tasks(["game:GuessTheNumber-v0"], range(6))
        )
        asyncio.run(agent.aclose())
    assert all(e.success and e.error is None for e in episodes)
    assert all(e.num_turns <= 6 for e in episodes)  # binary search on 1..50
    assert sum(path == "/v1/chat/completions" for path, _ in server.requests) >= 2 + sum(
        e.num_turns for e in episodes
    )


def test_one_agent_serves_several_runs_each_with_its_own_event_loop():
    # Kept-alive connections belong to the loop that opened them; each run has a new loop.
    with StubServer() as server:
        agent = make_agent(f"openai:stub@{server.url}")
        for _ in range(2):
            episodes = Runner(agent).run(make_tasks(["game:GuessTheNumber-v0"], [0, 1]))
            assert [e.error for e in episodes] == [None, None]
            assert all(e.success for e in episodes)
        asyncio.run(agent.aclose())
