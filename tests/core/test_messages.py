"""Chat messages built in one place, and the OpenAI form both ways."""

from __future__ import annotations

import json

from palaestra.core.messages import (
    action_text,
    append_messages,
    continues_message,
    to_openai_messages,
    turn_messages,
)
from palaestra.core.tool_calls import ToolCall, format_tool_call
from palaestra.core.types import Turn


def call(name: str, **arguments) -> str:
    return format_tool_call(ToolCall(name, arguments))


def test_one_tool_message_per_call_output():
    turn = Turn(
        call("python", code="1") + call("python", code="2"),
        "1\n\n2",
        0.0,
        info={"tool_outputs": ["1", "2"]},
        observation_role="tool",
    )
    assert turn.messages()[1:] == [
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
    ]
    assert turn_messages("done", "", ended=True) == [{"role": "assistant", "content": "done"}]


def test_openai_form_pairs_each_result_with_its_call_id():
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "Let me see." + call("search", q="café") + call("f")},
        {"role": "tool", "content": "a"},
        {"role": "tool", "content": "b"},
        {"role": "tool", "content": "extra error"},
    ]
    converted = to_openai_messages(messages)
    assistant = converted[1]
    assert assistant["content"] == "Let me see."
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "search",
        "arguments": '{"q": "café"}',
    }
    assert converted[2:] == [
        {"role": "tool", "tool_call_id": ids[0], "content": "a"},
        {"role": "tool", "tool_call_id": ids[1], "content": "b\n\nextra error"},
    ]


def test_calls_inside_reasoning_are_not_sent_as_calls():
    # the envs make no call written inside <think>, so no result may be paired with one
    text = "<think>maybe" + call("search", q="x") + "</think>Sure." + call("f")
    converted = to_openai_messages([{"role": "assistant", "content": text}])
    assert [c["function"]["name"] for c in converted[0]["tool_calls"]] == ["f"]


def test_results_of_unparsable_calls_go_out_as_user_messages():
    messages = [
        {"role": "assistant", "content": "<tool_call>{oops</tool_call>"},
        {"role": "tool", "content": "error: tool call is not valid JSON"},
    ]
    assert to_openai_messages(messages) == [
        {"role": "assistant", "content": "<tool_call>{oops</tool_call>"},
        {"role": "user", "content": "error: tool call is not valid JSON"},
    ]


def test_a_reply_becomes_the_same_bytes_as_the_serializer_writes():
    reply = {
        "content": "Searching.",
        "reasoning_content": "hmm",
        "tool_calls": [
            {"id": "x", "function": {"name": "search", "arguments": json.dumps({"q": "café"})}},
            {"id": "y", "function": {"name": "f", "arguments": "{not json"}},
        ],
    }
    text = action_text(reply)
    assert text.startswith("<think>hmm</think>Searching.")
    assert call("search", q="café") in text  # not {"q": "caf\\u00e9"}
    assert '"arguments": "{not json"' in text  # passed on, so the env can say what is wrong


def test_an_observation_that_continues_the_assistant_message_joins_it():
    """info["role"] == "assistant": action, observation and the next action are one message."""
    turns = [
        Turn(
            "<search>q</search>",
            "\n\n<information>d</information>\n\n",
            0.0,
            observation_role="assistant",
        ),
        Turn("<answer>a</answer>", "Correct.", 1.0, terminated=True),
    ]
    messages = [{"role": "user", "content": "task"}]
    for turn in turns:
        append_messages(messages, turn.messages())
    assert messages == [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "<search>q</search>\n\n<information>d</information>\n\n<answer>a</answer>",
        },
        {"role": "user", "content": "Correct."},
    ]
    assert continues_message(messages[:2]) and not continues_message(messages)
    plain = [Turn("x", "hint", 0.0), Turn("y", "", 0.0, terminated=True)]
    joined = [m for t in plain for m in t.messages()]
    assert append_messages([], joined) == joined  # nothing else is joined
