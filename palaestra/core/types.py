"""Trajectory types shared by the runner, the trainer and the exporters (``docs/runner.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from palaestra.core.messages import Message, append_messages, opening_messages, turn_messages


@dataclass(slots=True)
class Turn:
    """One agent action and the env's answer to it.

    ``token_ids``/``logprobs`` are the action's tokens exactly as the engine produced them
    (empty when the agent does not report tokens); ``observation_role`` is ``"tool"`` when
    the observation is a tool result.
    """

    action: str
    observation: str
    reward: float
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    observation_role: str = "user"
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None

    def messages(self) -> list[Message]:
        """This turn as chat messages (:func:`palaestra.core.messages.turn_messages`)."""
        return turn_messages(
            self.action,
            self.observation,
            role=self.observation_role,
            ended=self.terminated or self.truncated,
            tool_outputs=self.info.get("tool_outputs"),
        )


@dataclass(slots=True)
class Episode:
    """A whole episode: the conversation, per-turn rewards and the token-level sequence.

    Token-level fields run parallel to each other over the full sequence (prompt, actions
    and observations): ``loss_mask`` is 1 on policy tokens only, ``turn_index`` is the turn a
    token belongs to (-1 for the initial prompt), ``logprobs`` is 0.0 where the engine gave none.
    ``error`` is set when the env or agent crashed; such episodes are kept out of training.
    ``duration_s`` is the wall time from reset to the episode's end. ``problem_id`` is the
    dataset row the env served (its reset ``info["problem_id"]``), if any.
    """

    env_id: str
    seed: int | None
    task: str
    system_prompt: str | None = None
    problem_id: str | None = None
    turns: list[Turn] = field(default_factory=list)
    success: bool | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    truncation_reason: str | None = None
    error: str | None = None
    policy_version: int = 0
    group_id: int | None = None
    duration_s: float = 0.0
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turn_index: list[int] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        """Per-turn rewards, in order."""
        return [turn.reward for turn in self.turns]

    @property
    def total_reward(self) -> float:
        """Undiscounted return of the episode."""
        return float(sum(self.rewards))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def done(self) -> bool:
        """Whether the episode reached its end (terminated or truncated)."""
        return bool(self.turns) and (self.turns[-1].terminated or self.turns[-1].truncated)

    @property
    def messages(self) -> list[Message]:
        """The full conversation as chat messages (system, task, then action/observation pairs)."""
        messages = opening_messages(self.system_prompt, self.task)
        for turn in self.turns:
            append_messages(messages, turn.messages())
        return messages

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (the format of trajectory JSONL files)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["turns"] = [Turn(**turn) for turn in data.get("turns", [])]
        return cls(**data)
