"""Simulated users: the other side of a tool-use conversation.

A user opens the conversation with the task's request and answers each message the agent
sends it (tool calls go to the tools, everything else to the user). A user sees what a
person would: the agent's messages and the values the records it read have shown (details
it may recognise as true). It never sees the grade: like tau2-bench's user simulator, it
decides to end the conversation from what the agent says, and the env grades the final
state afterwards. Two kinds:

* :class:`ScriptedUser` (default): reads the sentences of a message that ask something (end
  in ``?``, open with a question word, or make a request: "Please provide your zip code.";
  "Dr." and "a.m." end no sentence) and matches its facts' topics there as whole words
  ("update your file" asks no date); tells at most :data:`FACTS_PER_REPLY` facts per reply,
  and none when one message asks about more than :data:`MAX_TOPICS_ASKED` of the domain's
  topics (a questionnaire of every topic gets "one thing at a time"); agrees to a proposal
  ("Shall I proceed?", "Please confirm.") unless it states a value that is neither the
  user's own (its request and facts) nor shown to the agent by the records; a fact asked
  again gets "As I said". When a message asks nothing it can answer and closes
  (:func:`closes`: the work is reported done, the request refused, or "anything else?"),
  it thanks the agent and ends the conversation, whether or not the work was done right.
  Answers and agreements are productive; after ``patience`` unproductive replies it gives
  up. Its replies depend on the message, its own facts and the values shown only.
* :class:`AgentUser`: any palaestra agent (a served model with a persona prompt) plays the
  user; it ends the conversation by writing ``###STOP###``.

Both are graded the same way (final database, facts told, action checks; see
:mod:`palaestra.envs.tools.backend`); the user only decides when the conversation ends.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from palaestra.agents.base import Agent, Conversation, next_action
from palaestra.core.messages import Message
from palaestra.envs.tools.backend import ToolTask, UserFact
from palaestra.envs.tools.facts import (
    GRADED,
    Values,
    has_phrase,
    merge,
    plain,
    sentences,
    shown,
    values,
)

STOP = "###STOP###"
FACTS_PER_REPLY = 2
"""Most facts the scripted user tells in one reply."""
MAX_TOPICS_ASKED = 3
"""Most of the domain's topics one message may ask about before the user asks to go slower."""
MAX_READ_CHARS = 4000
"""How much of a message the scripted user reads."""
AGREEMENT_KINDS = (*GRADED, "date", "phone", "number")
"""Kinds of values a proposal must take from the user's goal."""
THANKS = "Thank you, that's all I needed."

Shown = Mapping[str, set[str]]
"""Values by kind that the records the agent read have shown (see
:func:`~palaestra.envs.tools.facts.shown`)."""


@dataclass(frozen=True)
class UserTurn:
    """The user's reply, and whether it ends the conversation."""

    text: str
    stop: bool = False


@runtime_checkable
class SimulatedUser(Protocol):
    """Opens a conversation about a task and replies to the agent's messages; it is given
    the message and the values the agent has been shown, never how the task is graded. A
    user that keeps ``told`` (the :class:`UserFact` s it has told) lets the env fail writes
    made before the facts they need were told (guesses)."""

    def start(self, task: ToolTask) -> str:
        """Begin a conversation; returns the user's opening message."""
        ...

    def respond(self, message: str, shown: Shown) -> UserTurn | Awaitable[UserTurn]:
        """Reply to the agent's ``message`` (plain or async); ``shown``: the values the
        agent's reads have shown so far (true details the user may recognise)."""
        ...


YES = "Yes, please go ahead."
CONFIRMATION_CUES = (
    "confirm", "proceed", "go ahead", "shall i", "should i", "would you like me",
    "do you want me", "okay to", "ok to", "is that ok", "is that okay", "is that right",
    "is that correct", "sound good", "sounds good", "happy for me", "may i",
)  # fmt: skip
REQUEST_CUES = (
    "please", "let me know", "tell me", "provide", "share", "give me", "send me", "confirm",
    "specify", "i need", "i'll need", "i will need", "i'd need", "i would need", "we need",
    "we'll need", "may i have", "can i have", "could i have", "can i get", "could i get",
)  # fmt: skip
"""Words that make a sentence ask something, wherever they stand ("Please provide ...")."""
QUESTION_STARTS = (
    "what", "what's", "which", "who", "whom", "whose", "how", "where", "when", "could you",
    "can you", "would you", "will you", "do you", "are you", "is it", "is that",
)  # fmt: skip
"""Words that make a sentence a question when it opens with them (no ``?`` needed)."""
OPENERS = (
    "ok", "okay", "great", "thanks", "thank you", "alright", "sure", "so", "now", "first",
    "next", "also", "and", "then", "finally", "lastly", "perfect", "got it",
)  # fmt: skip


def questions(message: str) -> list[str]:
    """The sentences of ``message`` that ask something, as :func:`plain` text: those that end
    with ``?``, open with a question word, or make a request ("Please provide your name.",
    "I'll need your zip code."). Abbreviations ("Dr.", "a.m.") end no sentence."""
    asked = []
    for sentence in sentences(message):
        words = plain(sentence)
        opening = _without_openers(words)
        if (
            sentence.strip().endswith("?")
            or has_phrase(words, REQUEST_CUES)
            or any(opening == q or opening.startswith(q + " ") for q in QUESTION_STARTS)
        ):
            asked.append(words)
    return asked


def _without_openers(words: str) -> str:
    """``words`` without the fillers that open a sentence ("ok so now which ...")."""
    while True:
        opener = next((o for o in OPENERS if words == o or words.startswith(o + " ")), None)
        if opener is None:
            return words
        words = words[len(opener) :].lstrip()


CLOSING_QUESTIONS = (
    "anything else", "anything more", "something else", "what else", "anything further",
    "further assistance", "further questions", "any other questions", "more i can help",
    "else i can help", "else i can do", "other requests",
)  # fmt: skip
"""Words of a question that offers more help once the work is over ("Anything else?"): such
a question asks the user nothing, and it closes the message."""
DONE_CUES = (
    "done", "all set", "taken care of", "complete", "completed", "successfully", "finished",
    "went through", "good to go", "have a great day", "have a nice day", "have a good day",
    "is confirmed", "are confirmed",
)  # fmt: skip
"""Words of a statement that the work is over ("All set.", "Your booking is confirmed.")."""
REFUSAL_CUES = (
    "can't", "cannot", "can not", "unable", "not able", "won't be able", "not possible",
    "isn't possible", "impossible", "not allowed", "not permitted", "not eligible",
    "isn't eligible", "i'm afraid",
)  # fmt: skip
"""Words of a statement that the request cannot be done."""
COMPLETED = (
    "cancelled", "canceled", "refunded", "booked", "rescheduled", "transferred", "updated",
    "changed", "exchanged", "returned", "processed", "issued", "closed", "opened", "frozen",
    "unfrozen", "blocked", "unblocked", "disputed", "filed", "submitted", "scheduled",
    "moved", "sent", "paid", "credited", "removed", "added", "modified", "replaced",
    "reversed", "initiated", "created", "ordered", "confirmed", "arranged", "set up",
)  # fmt: skip
"""Past participles of the domains' actions: "I've cancelled it", "Your card has been
blocked" report the work done."""
_DOER = (
    "i've", "i have", "i", "we've", "we have", "we", "has been", "have been", "is now",
    "are now", "was", "were", "i just", "i went ahead and",
)  # fmt: skip
INTENT_CUES = (
    "let me", "i'll", "i will", "i'm going to", "i am going to", "i need to", "one moment",
    "a moment", "hold on", "bear with me", "give me a", "next i", "now i",
)  # fmt: skip
"""Words that say the agent has more to do: a message holding them closes nothing."""
NEGATIONS = ("not", "never", "yet", "haven't", "hasn't", "didn't", "isn't", "wasn't")
_COMPLETION = re.compile(
    rf"(?:^|(?<![\w'])(?:{'|'.join(map(re.escape, _DOER))})(?: [\w']+){{0,2}} )"
    rf"(?:{'|'.join(map(re.escape, COMPLETED))})(?![\w'])"
)


def closes(message: str) -> bool:
    """Whether ``message`` reads as the end of the agent's work: it asks whether anything
    else is needed (:data:`CLOSING_QUESTIONS`), or a statement in it reports the work done
    ("All set.", "I've cancelled the order.", "Your card has been blocked.") or the request
    refused ("I'm sorry, I can't do that: ...") and nothing in it says more is to come
    ("Let me check.", "I'll book it now."). Judged from the words alone: whether the work
    was done, or done right, is the grader's business.

    >>> closes("Your order has been cancelled; the refund goes to your card.")
    True
    >>> closes("I found your order. Let me cancel it.")
    False
    """
    said = [(sentence.rstrip().endswith("?"), plain(sentence)) for sentence in sentences(message)]
    if any(has_phrase(words, CLOSING_QUESTIONS) for _, words in said):
        return True
    if any(has_phrase(words, INTENT_CUES) for _, words in said):
        return False
    return any(
        has_phrase(words, REFUSAL_CUES)
        or (
            not question
            and not has_phrase(words, NEGATIONS)
            and (has_phrase(words, DONE_CUES) or bool(_COMPLETION.search(words)))
        )
        for question, words in said
    )


def asks(asked: Sequence[str], topics: Sequence[str]) -> bool:
    """Whether one of the ``asked`` questions holds one of ``topics`` as whole words."""
    return any(has_phrase(question, topics) for question in asked)


def own_values(task: ToolTask) -> Values:
    """Every value the user itself knows: its request and its facts (nothing of the reference
    solution)."""
    found: Values = {}
    for text in (task.request, *(f.text for f in task.facts)):
        merge(found, shown(text, task.vocabulary))
    return found


@dataclass
class ScriptedUser:
    """A rule-based user (see the module docstring); ``patience`` unproductive replies
    (nothing asked that it can answer, nothing to agree to) before it gives up."""

    patience: int = 3
    task: ToolTask | None = None
    told: set[UserFact] = field(default_factory=set)
    idle_replies: int = 0
    known: Values | None = None

    def start(self, task: ToolTask) -> str:
        self.task, self.told, self.idle_replies, self.known = task, set(), 0, own_values(task)
        return task.request

    def respond(self, message: str, shown: Shown) -> UserTurn:
        task = self.task
        if task is None:
            raise RuntimeError("ScriptedUser.respond before start")
        message = message[:MAX_READ_CHARS]
        asked = [q for q in questions(message) if not has_phrase(q, CLOSING_QUESTIONS)]
        too_many = sum(asks(asked, group) for group in task.topics) > MAX_TOPICS_ASKED
        new = [f for f in task.facts if f not in self.told and asks(asked, f.topics)]
        if new and not too_many:
            self.told.update(new[:FACTS_PER_REPLY])
            return UserTurn(" ".join(fact.text for fact in new[:FACTS_PER_REPLY]))
        if asks(asked, CONFIRMATION_CUES) and not too_many:
            if self.agrees(message, shown):
                return UserTurn(YES)
            return self._idle(f"No, that is not what I asked for. {task.request}")
        repeated = [f.text for f in task.facts if f in self.told and asks(asked, f.topics)]
        if repeated and not too_many:
            return UserTurn("As I said: " + " ".join(repeated))
        if closes(message):
            return UserTurn(THANKS, stop=True)
        if too_many:
            return self._idle("That's a lot of questions at once. What do you need first?")
        if asked:
            return self._idle(f"I don't know that. What I need: {task.request}")
        return self._idle(f"Is it done? What I need: {task.request}")

    def _idle(self, text: str) -> UserTurn:
        """An unproductive reply, or giving up after ``patience`` of them."""
        self.idle_replies += 1
        if self.idle_replies > self.patience:
            return UserTurn("This isn't going anywhere; I'll try another time.", stop=True)
        return UserTurn(text)

    def agrees(self, proposal: str, shown_to_agent: Shown) -> bool:
        """Whether every id and value ``proposal`` states is the user's own (its request and
        facts) or a true detail of the records the agent was shown: the user objects to what
        is made up, never to what the reference solution does not hold."""
        if self.task is None or self.known is None:
            raise RuntimeError("ScriptedUser.agrees before start")
        stated = values(proposal, self.task.vocabulary)
        return all(
            value in self.known.get(kind, ()) or value in shown_to_agent.get(kind, ())
            for kind in AGREEMENT_KINDS
            for value in stated[kind]
        )


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

    async def respond(self, message: str, shown: Shown) -> UserTurn:
        self.messages.append({"role": "user", "content": message})
        action = await next_action(self.agent, Conversation(list(self.messages)))
        text = action.text.strip()
        self.messages.append({"role": "assistant", "content": text})
        stop = STOP in text
        return UserTurn(text.replace(STOP, "").strip() or "Goodbye.", stop=stop)
