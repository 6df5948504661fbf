"""Simulated users: the other side of a tool-use conversation.

A user opens the conversation with the task's request and answers each message the agent
sends it (tool calls go to the tools, everything else to the user). Two kinds:

* :class:`ScriptedUser` (default): tells what only it knows when the agent's message asks
  about it (other questions get "I don't know that"), says yes to confirmation questions,
  asks for the facts it wants to hear once the work is done, ends the conversation when
  satisfied and gives up after ``patience`` unproductive replies. Deterministic, instant,
  and it cannot be talked into anything: it judges "satisfied" by the database, not by
  what the agent claims.
* :class:`AgentUser`: any palaestra agent (a served model with a persona prompt) plays the
  user; it ends the conversation by writing ``###STOP###``.

Both are graded the same way (final database and reported facts, see
:mod:`palaestra.envs.tools.backend`); the user only decides when the conversation ends.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from palaestra.agents.base import Agent, Conversation, next_action
from palaestra.core.messages import Message
from palaestra.envs.tools.backend import ToolTask, UserFact

STOP = "###STOP###"


@dataclass(frozen=True)
class Progress:
    """What the env tells the user after each agent message (the user is part of the env)."""

    database_done: bool
    reported: bool

    @property
    def satisfied(self) -> bool:
        return self.database_done and self.reported


@dataclass(frozen=True)
class UserTurn:
    """The user's reply, and whether it ends the conversation."""

    text: str
    stop: bool = False


@runtime_checkable
class SimulatedUser(Protocol):
    """Opens a conversation about a task and replies to the agent's messages."""

    def start(self, task: ToolTask) -> str:
        """Begin a conversation; returns the user's opening message."""
        ...

    def respond(self, message: str, progress: Progress) -> UserTurn | Awaitable[UserTurn]:
        """Reply to the agent's ``message`` (plain or async)."""
        ...


YES = "Yes, please go ahead."
CONFIRMATION_CUES = ("confirm", "proceed", "go ahead", "shall i", "should i", "would you like me")


@dataclass
class ScriptedUser:
    """A rule-based user (see the module docstring); ``patience`` unproductive replies
    (nothing new asked, nothing done) before it gives up."""

    patience: int = 3
    task: ToolTask | None = None
    told: set[UserFact] = field(default_factory=set)
    idle_replies: int = 0

    def start(self, task: ToolTask) -> str:
        self.task, self.told, self.idle_replies = task, set(), 0
        return task.request

    def respond(self, message: str, progress: Progress) -> UserTurn:
        task = self.task
        if task is None:
            raise RuntimeError("ScriptedUser.respond before start")
        if progress.satisfied:
            return UserTurn("Thank you, that's all I needed.", stop=True)
        asked = message.lower()
        new = [f for f in task.facts if f not in self.told and any(t in asked for t in f.topics)]
        if new:
            self.told.update(new)
            return UserTurn(" ".join(fact.text for fact in new))
        self.idle_replies += 1
        if self.idle_replies > self.patience:
            return UserTurn("This isn't going anywhere; I'll try another time.", stop=True)
        if progress.database_done:
            return UserTurn(task.report_question)
        if any(cue in asked for cue in CONFIRMATION_CUES):
            return UserTurn(YES)
        repeated = [
            f.text for f in task.facts if f in self.told and any(t in asked for t in f.topics)
        ]
        if repeated:
            return UserTurn("As I said: " + " ".join(repeated))
        if "?" in message:
            return UserTurn(f"I don't know that. What I need: {task.request}")
        return UserTurn(f"That doesn't solve my problem yet. To repeat: {task.request}")


PERSONA = """You are a customer talking to a support agent, in short, natural messages.
Your goal: {goal}
What you know (tell each item only when the agent asks for it; never invent anything else):
{facts}
Do not do the agent's work and do not accept anything other than your goal.
When your goal has been met, or clearly cannot be met, end your message with {stop}."""


class AgentUser:
    """A palaestra agent as the user: it sees the conversation from the user's side (the
    support agent's messages as ``user`` messages, its own as ``assistant``) after a persona
    prompt built from the task; ``###STOP###`` in its reply ends the conversation. The
    opening message is the task's request, so a seed still fixes the first observation."""

    def __init__(self, agent: Agent, persona: str = PERSONA):
        self.agent = agent
        self.persona = persona
        self.messages: list[Message] = []

    def start(self, task: ToolTask) -> str:
        facts = "\n".join(f"- {fact.text}" for fact in task.facts) or "- (nothing beyond your goal)"
        system = self.persona.format(goal=task.goal or task.request, facts=facts, stop=STOP)
        self.messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": "(The support agent is waiting for your first message.)"},
            {"role": "assistant", "content": task.request},
        ]
        return task.request

    async def respond(self, message: str, progress: Progress) -> UserTurn:
        self.messages.append({"role": "user", "content": message})
        action = await next_action(self.agent, Conversation(list(self.messages)))
        text = action.text.strip()
        self.messages.append({"role": "assistant", "content": text})
        stop = STOP in text
        return UserTurn(text.replace(STOP, "").strip() or "Goodbye.", stop=stop)
