"""Simulated users: the other side of a tool-use conversation.

A user opens the conversation with the task's request and answers each message the agent
sends it (tool calls go to the tools, everything else to the user). Two kinds:

* :class:`ScriptedUser` (default): reads only the questions of a message (its sentences that
  end in ``?``) and matches its facts' topics there as whole words ("update your file" asks
  no date); tells at most :data:`FACTS_PER_REPLY` facts per reply, and none when one message
  asks about more than :data:`MAX_TOPICS_ASKED` of the domain's topics (a questionnaire of
  every topic gets "one thing at a time"); agrees to a proposal ("Shall I proceed?") only when
  every id and value the message states belongs to its goal, and objects otherwise; ends the
  conversation when satisfied and gives up after ``patience`` unproductive replies. Its
  replies never depend on the database, only its satisfaction does, so it leaks nothing
  about the state (not even that a refused request needs no action).
* :class:`AgentUser`: any palaestra agent (a served model with a persona prompt) plays the
  user; it ends the conversation by writing ``###STOP###``.

Both are graded the same way (final database, facts told, action checks; see
:mod:`palaestra.envs.tools.backend`); the user only decides when the conversation ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from palaestra.agents.base import Agent, Conversation, next_action
from palaestra.core.messages import Message
from palaestra.envs.tools.backend import ToolTask, UserFact
from palaestra.envs.tools.facts import GRADED, Values, has_phrase, merge, plain, shown, values

STOP = "###STOP###"
FACTS_PER_REPLY = 2
"""Most facts the scripted user tells in one reply."""
MAX_TOPICS_ASKED = 3
"""Most of the domain's topics one message may ask about before the user asks to go slower."""
MAX_READ_CHARS = 4000
"""How much of a message the scripted user reads."""
AGREEMENT_KINDS = (*GRADED, "date", "phone", "number")
"""Kinds of values a proposal must take from the user's goal."""


@dataclass(frozen=True)
class Progress:
    """What the env tells the user after each agent message (the user is part of the env)."""

    database_done: bool
    reported: bool
    rules_followed: bool = True

    @property
    def satisfied(self) -> bool:
        return self.database_done and self.reported and self.rules_followed


@dataclass(frozen=True)
class UserTurn:
    """The user's reply, and whether it ends the conversation."""

    text: str
    stop: bool = False


@runtime_checkable
class SimulatedUser(Protocol):
    """Opens a conversation about a task and replies to the agent's messages. A user that
    keeps ``told`` (the :class:`UserFact` s it has told) lets the env fail writes made before
    the facts they need were told (guesses)."""

    def start(self, task: ToolTask) -> str:
        """Begin a conversation; returns the user's opening message."""
        ...

    def respond(self, message: str, progress: Progress) -> UserTurn | Awaitable[UserTurn]:
        """Reply to the agent's ``message`` (plain or async)."""
        ...


YES = "Yes, please go ahead."
CONFIRMATION_CUES = (
    "confirm", "proceed", "go ahead", "shall i", "should i", "would you like me",
    "do you want me", "okay to", "ok to", "is that ok", "is that okay", "is that right",
)  # fmt: skip


def questions(message: str) -> list[str]:
    """The sentences of ``message`` that ask something (end with ``?``), as :func:`plain`
    text."""
    sentences = re.split(r"(?<=[.!?])\s+|\n+", message)
    return [plain(sentence) for sentence in sentences if sentence.strip().endswith("?")]


def asks(asked: Sequence[str], topics: Sequence[str]) -> bool:
    """Whether one of the ``asked`` questions holds one of ``topics`` as whole words."""
    return any(has_phrase(question, topics) for question in asked)


def goal_values(task: ToolTask) -> Values:
    """Every value the user's goal involves: its request, goal, facts, the facts it expects to
    hear, and the reference calls' arguments and outputs."""
    texts = [task.request, task.goal, *(f.text for f in task.facts), *(f.text for f in task.report)]
    texts += [json.dumps(action.arguments, default=str) for action in task.actions]
    texts += task.outcomes
    found: Values = {}
    for text in texts:
        merge(found, shown(text, task.vocabulary))
    return found


@dataclass
class ScriptedUser:
    """A rule-based user (see the module docstring); ``patience`` unproductive replies
    (nothing new asked, nothing done) before it gives up; it accepts a proposal's values when
    they are :func:`goal_values` (read at the first proposal)."""

    patience: int = 3
    task: ToolTask | None = None
    told: set[UserFact] = field(default_factory=set)
    idle_replies: int = 0
    agreeable: Values | None = None

    def start(self, task: ToolTask) -> str:
        self.task, self.told, self.idle_replies, self.agreeable = task, set(), 0, None
        return task.request

    def respond(self, message: str, progress: Progress) -> UserTurn:
        task = self.task
        if task is None:
            raise RuntimeError("ScriptedUser.respond before start")
        if progress.satisfied:
            return UserTurn("Thank you, that's all I needed.", stop=True)
        asked = questions(message[:MAX_READ_CHARS])
        too_many = sum(asks(asked, group) for group in task.topics) > MAX_TOPICS_ASKED
        new = [f for f in task.facts if f not in self.told and asks(asked, f.topics)]
        if new and not too_many:
            self.told.update(new[:FACTS_PER_REPLY])
            return UserTurn(" ".join(fact.text for fact in new[:FACTS_PER_REPLY]))
        self.idle_replies += 1
        if self.idle_replies > self.patience:
            return UserTurn("This isn't going anywhere; I'll try another time.", stop=True)
        if too_many:
            return UserTurn("That's a lot of questions at once. What do you need first?")
        return UserTurn(self._idle_reply(message, asked, task))

    def _idle_reply(self, message: str, asked: list[str], task: ToolTask) -> str:
        repeated = [f.text for f in task.facts if f in self.told and asks(asked, f.topics)]
        if repeated:
            return "As I said: " + " ".join(repeated)
        if asks(asked, CONFIRMATION_CUES):
            if self.agrees(message[:MAX_READ_CHARS]):
                return YES
            return f"No, that is not what I asked for. {task.request}"
        if asked:
            return f"I don't know that. What I need: {task.request}"
        return f"Is it done? What I need: {task.request}"

    def agrees(self, proposal: str) -> bool:
        """Whether every id and value ``proposal`` states belongs to the user's goal."""
        if self.task is None:
            raise RuntimeError("ScriptedUser.agrees before start")
        if self.agreeable is None:
            self.agreeable = goal_values(self.task)
        stated, agreeable = values(proposal, self.task.vocabulary), self.agreeable
        return all(stated[kind] <= agreeable.get(kind, set()) for kind in AGREEMENT_KINDS)


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
