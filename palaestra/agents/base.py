"""The agent protocol: ``Agent.act(conversation) -> Action`` (``docs/runner.md``, Agents)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from palaestra.core.messages import Message, append_messages
from palaestra.core.types import Turn

if TYPE_CHECKING:
    from palaestra.core.env import Env


@dataclass(slots=True)
class Action:
    """What an agent returns for one turn.

    ``token_ids``/``logprobs`` are the completion's tokens exactly as the engine sampled them
    (empty when the backend does not report them); ``finish_reason`` is the engine's
    (``"stop"``, ``"length"``, ...) or None.
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None


class Conversation:
    """The state an agent sees when it acts; the runner keeps one per episode and grows it.

    ``messages`` is the chat so far: the opening ``messages`` (system prompt, task), then the
    action and observation of each of ``turns``, the episode's turns, which the runner
    appends to. They are turned into messages when ``messages`` is read, so agents that read
    only ``last_observation`` (oracle, scripted policies) never pay for them.
    ``prompt_ids`` is the token sequence the policy continues, ending with the generation
    prompt (or, when the env continued the assistant's message, with that continuation);
    it is set only when the agent has a ``tokenizer`` (token-in, token-out).
    ``env`` is the live env for privileged baselines (oracle, random); it is None when the env
    runs in another process. ``tools`` are the env's tool schemas and ``tool_format`` the
    name of the tool-call format it reads (:mod:`palaestra.core.tool_calls`).
    ``rng`` is seeded from ``seed`` (task seed and sample index),
    for sampling agents; ``state`` is scratch space an agent may use for the rest of the
    episode. ``max_tokens`` is the most tokens the next completion may have before the
    episode's token budget runs out (None without a budget); the runner cuts a longer one.
    """

    __slots__ = (
        "_messages",
        "_rng",
        "_turns",
        "_turns_seen",
        "env",
        "max_tokens",
        "prompt_ids",
        "seed",
        "state",
        "tool_format",
        "tools",
    )

    def __init__(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        turns: list[Turn] | None = None,
        prompt_ids: list[int] | None = None,
        env: Env | None = None,
        seed: Any = None,
        tool_format: str = "hermes",
    ):
        self._messages = messages
        self._turns = turns
        self._turns_seen = 0
        self.tools = [] if tools is None else tools
        self.tool_format = tool_format
        self.prompt_ids = prompt_ids
        self.max_tokens: int | None = None
        self.env = env
        self.seed = seed
        self.state: dict[str, Any] = {}
        self._rng: np.random.Generator | None = None

    def __repr__(self) -> str:
        return f"Conversation(turns={len(self._turns or ())}, seed={self.seed!r})"

    @property
    def messages(self) -> list[Message]:
        """The chat so far: the opening messages, then each turn's action and observation."""
        turns = self._turns
        if turns is not None and self._turns_seen < len(turns):
            for turn in turns[self._turns_seen :]:
                append_messages(self._messages, turn.messages())
            self._turns_seen = len(turns)
        return self._messages

    @property
    def rng(self) -> np.random.Generator:
        """The episode's rng, seeded from ``seed`` on first use (None: fresh entropy)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

    @property
    def last_observation(self) -> str:
        """The latest observation (the task on the first turn)."""
        if self._turns:
            return self._turns[-1].observation
        for message in reversed(self._messages):
            if message["role"] != "assistant":
                return str(message.get("content") or "")
        return ""


@runtime_checkable
class Agent(Protocol):
    """Anything with an ``act``: a coroutine function, or a plain function for agents that
    never wait (oracle, random, scripted policies), which the runner calls inline (no
    coroutine per turn). Call it through :func:`next_action` to accept both kinds.

    Optional attributes the runner reads:

    * ``tokenizer``: a Hugging Face tokenizer with a chat template; when present, the runner
      builds the episode's token sequence and passes ``Conversation.prompt_ids``;
    * ``name``: a label for reports;
    * ``aclose()``: called by the runner's owner when done (HTTP clients, engines).
    """

    def act(self, conversation: Conversation) -> Action | Awaitable[Action]: ...


def acts_inline(agent: Agent) -> bool:
    """Whether ``agent.act`` is a plain function that returns its :class:`Action` at once."""
    return not inspect.iscoroutinefunction(agent.act)


async def resolve_action(result: Action | Awaitable[Action]) -> Action:
    """What ``act`` returned, as an Action: awaited if awaitable (a plain ``act`` may delegate
    to an async one), else checked, with an error that names the mistake."""
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, Action):
        raise TypeError(f"agent.act returned {type(result).__name__}; it must return an Action")
    return result


async def next_action(agent: Agent, conversation: Conversation) -> Action:
    """The agent's next action, whether its ``act`` is async or plain."""
    return await resolve_action(agent.act(conversation))


def agent_name(agent: Agent) -> str:
    """The agent's ``name`` attribute, else its class name."""
    return str(getattr(agent, "name", None) or type(agent).__name__)


async def close_agent(agent: Agent) -> None:
    """Call the agent's ``aclose()`` if it has one."""
    aclose = getattr(agent, "aclose", None)
    if aclose is not None:
        await aclose()


@dataclass(slots=True)
class Sampling:
    """Sampling settings shared by the model backends."""

    max_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def tokens_for(self, conversation: Conversation) -> int:
        """The most tokens to sample for ``conversation``'s next completion: ``max_tokens``,
        or less when the episode's token budget leaves less room (``Conversation.max_tokens``)."""
        room = conversation.max_tokens
        return self.max_tokens if room is None else max(1, min(self.max_tokens, room))
