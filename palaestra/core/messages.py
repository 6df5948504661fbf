"""Chat messages: the one place they are built (``docs/runner.md``).

palaestra's own form is plain chat messages: an assistant message holds exactly the text the
policy wrote (tool calls included, in the env's tool-call format), and a tool result is a
``{"role": "tool", "content": ...}`` message, one per call. Episodes, conversations, the
runner's token recording and the Hugging Face agent use this form.

An env may also continue the assistant's own message instead of answering in a new one
(``info["role"] == "assistant"``, :data:`CONTINUE_ROLE`; Search-R1 appends retrieved
``<information>`` this way): the observation's text joins the action's message and the
policy's next action continues that same message (:func:`append_messages`). Agents then
continue the last message rather than start a new turn (:func:`continues_message`).

OpenAI-compatible servers want another: an assistant message with structured ``tool_calls``
(each with an id) and its text apart, and one tool message per call carrying the matching
``tool_call_id``. :func:`to_openai_messages` converts to it and :func:`action_text` converts
a server's reply back, both through the one tool-call serializer of
:mod:`palaestra.core.tool_calls`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any

from palaestra.core.tool_calls import (
    ToolCall,
    dump_arguments,
    format_tool_call,
    parse_tool_calls,
    strip_tool_calls,
)

Message = dict[str, Any]
"""A chat message: ``{"role": ..., "content": ...}`` (OpenAI form may add tool-call fields)."""


def opening_messages(system_prompt: str | None, task: str) -> list[Message]:
    """The messages before the first action: the system prompt (if any), then the task."""
    messages: list[Message] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": task})
    return messages


CONTINUE_ROLE = "assistant"
"""``info["role"]`` of an observation that continues the assistant's message."""


def observation_messages(
    observation: str, role: str = "user", tool_outputs: Sequence[str] | None = None
) -> list[Message]:
    """An env's answer to one action as messages: one tool message per call output when the
    env reports them (``info["tool_outputs"]``), else one message with the observation (an
    assistant message when it continues the action's message, :data:`CONTINUE_ROLE`)."""
    if role == "tool" and tool_outputs:
        return [{"role": "tool", "content": output} for output in tool_outputs]
    return [{"role": role, "content": observation}]


def turn_messages(
    action: str,
    observation: str,
    *,
    role: str = "user",
    ended: bool = False,
    tool_outputs: Sequence[str] | None = None,
) -> list[Message]:
    """One turn: the action, then the observation (left out when the episode ended on this
    turn with nothing more to say; joined to the action when it continues its message)."""
    messages: list[Message] = [{"role": "assistant", "content": action}]
    if ended and not observation:
        return messages
    return append_messages(messages, observation_messages(observation, role, tool_outputs))


def append_messages(messages: list[Message], new: Sequence[Message]) -> list[Message]:
    """Append ``new`` to ``messages`` (in place; returned), joining each assistant message to
    an assistant message right before it: an action, the observation that continued it and
    the next action are one message. palaestra's form has two assistant messages in a row
    only there, so nothing else is joined.

    >>> append_messages([{"role": "assistant", "content": "<search>q</search>"}],
    ...                 [{"role": "assistant", "content": "<information>d</information>"}])
    [{'role': 'assistant', 'content': '<search>q</search><information>d</information>'}]
    """
    for message in new:
        last = messages[-1] if messages else None
        if last is not None and last.get("role") == message.get("role") == "assistant":
            messages[-1] = {**last, "content": f"{last['content']}{message['content']}"}
        else:
            messages.append(message)
    return messages


def continues_message(messages: Sequence[Message]) -> bool:
    """Whether the next action continues the last message (an assistant message the env
    continued) instead of starting a new assistant turn after a generation prompt."""
    return bool(messages) and messages[-1].get("role") == "assistant"


def to_openai_messages(messages: Sequence[Message]) -> list[Message]:
    """palaestra messages -> OpenAI chat form (structured tool calls with ids).

    Each assistant message's ``<tool_call>`` blocks become ``tool_calls`` with ids
    ``call_<message>_<call>``; the tool messages that follow get those ids in order. A tool
    message with no call left to answer is appended to the previous tool message, and tool
    messages after an assistant message without calls (e.g. malformed ones) are sent as user
    messages, so a strict server never sees a tool message without its call.
    """
    converted: list[Message] = []
    pending: list[str] = []  # ids of the last assistant message's calls not yet answered
    last_was_tool = False
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            converted.append(_openai_assistant(message, position))
            pending = [call["id"] for call in converted[-1].get("tool_calls", [])]
            last_was_tool = False
        elif role == "tool" and pending:
            converted.append(
                {"role": "tool", "tool_call_id": pending.pop(0), "content": message["content"]}
            )
            last_was_tool = True
        elif role == "tool" and last_was_tool:
            converted[-1] = {
                **converted[-1],
                "content": f"{converted[-1]['content']}\n\n{message['content']}",
            }
        else:
            converted.append(
                {"role": "user" if role == "tool" else role, "content": message["content"]}
            )
            last_was_tool = False
    return converted


def _openai_assistant(message: Message, position: int) -> Message:
    text = str(message.get("content") or "")
    calls = parse_tool_calls(without_reasoning(text)).calls  # as the envs read them
    if not calls:
        return {"role": "assistant", "content": text}
    content = strip_tool_calls(text)
    return {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {
                "id": f"call_{position}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": dump_arguments(call.arguments)},
            }
            for index, call in enumerate(calls)
        ],
    }


_REASONING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_REASONING_END = re.compile(r"</think>", re.IGNORECASE)


def without_reasoning(text: str) -> str:
    """``text`` without the model's reasoning (what :func:`action_text` keeps in ``<think>``):
    every ``<think>...</think>`` block (an unclosed one runs to the end), and everything before
    a ``</think>`` that no ``<think>`` opened (templates that open the block in the prompt).

    >>> without_reasoning("<think>9:00 or 9:30?</think>Booked for 9:30.")
    'Booked for 9:30.'
    >>> without_reasoning("the user wants 9:30</think>Booked for 9:30.")
    'Booked for 9:30.'
    """
    end = _REASONING_END.search(text)
    if end and "<think>" not in text[: end.start()].lower():
        text = text[end.end() :]
    return _REASONING.sub("", text).strip()


def action_text(message: Message) -> str:
    """An OpenAI chat reply message -> the action text palaestra envs read.

    Reasoning (``reasoning_content``) is kept inside ``<think>...</think>``; each structured
    tool call is appended in the default tool-call format. Arguments that are not valid JSON
    are passed on as a string, so the env can say what was wrong.
    """
    text = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        text = f"<think>{reasoning}</think>{text}"
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments: Any = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        text += format_tool_call(ToolCall(str(function.get("name")), arguments))
    return text
