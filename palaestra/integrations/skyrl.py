"""SkyRL: palaestra envs as ``skyrl-gym`` ``BaseTextEnv``s.

SkyRL's generator builds an env per dataset row with ``env_config`` and the row's fields as
``extras``, calls ``init(prompt)`` for the opening messages, then ``step(action)`` after each
completion until ``done``; a step returns the observation as chat messages (none once the
episode is done), the turn's reward and metadata. :class:`PalaestraTextEnv` does that for the
palaestra env and seed named in the row's ``extra_info`` (:func:`task_rows` makes the rows).
The turn budget is the env's own (``max_turns``, every step counted) or SkyRL's
``generator.max_turns``, which the generator passes as ``extras["max_turns"]``, whichever is
smaller; the metadata of the last step says which ended the episode. Tool results come back
as ``tool`` messages. An observation that continues the assistant's message (Search-R1's
``<information>``, ``info["role"] == "assistant"``) comes back as a ``user`` message, as
SkyRL's own search env sends it: SkyRL's generator has no way to continue a message, and an
``assistant`` message would be trained on as the policy's. SkyRL tokenizes the messages itself, with its own chat-template
handling, and keeps its token budget (``max_input_length``) itself: it stops before a
generation that would not fit, and the env's rewards so far are the episode's.

>>> register_skyrl_env()  # then env_class "palaestra" in the dataset  # doctest: +SKIP
>>> env = skyrl_gym.make("palaestra", env_config={}, extras=task_rows("game:Wordle-v0", [0])[0])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from palaestra.core.messages import (
    CONTINUE_ROLE,
    Message,
    observation_messages,
    opening_messages,
)
from palaestra.core.registry import make
from palaestra.core.wrappers import TURN_LIMIT_REASON
from palaestra.integrations.trajectory import task_from_dict, task_prompts
from palaestra.runner.episode import DEFAULT_MAX_TURNS, RUNNER_LIMIT_REASON

ENV_CLASS = "palaestra"


def task_rows(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """SkyRL dataset rows, one per seed: the opening messages as ``prompt``, ``env_class``
    ``"palaestra"`` and the task in ``extra_info``."""
    return [
        {
            "data_source": env_id,
            "prompt": messages,
            "env_class": ENV_CLASS,
            "reward_spec": {"method": "env", "ground_truth": None},
            "extra_info": task,
        }
        for task, messages in task_prompts(env_id, seeds, env_kwargs=env_kwargs)
    ]


class PalaestraTextEnv(BaseTextEnv):
    """A palaestra env behind SkyRL's ``BaseTextEnv`` contract (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        task = task_from_dict(extras.get("extra_info") or {})
        self.env_id = task.env_id
        self.seed = task.seed
        self.env = make(task.env_id, **task.env_kwargs)
        own = self.env.max_turns or DEFAULT_MAX_TURNS
        skyrl = extras.get("max_turns")
        self.max_turns = own if skyrl is None else min(own, int(skyrl))
        self.limit_reason = RUNNER_LIMIT_REASON if self.max_turns < own else TURN_LIMIT_REASON
        self.total_reward = 0.0
        self.success = False
        self.truncation_reason: str | None = None

    def init(self, prompt: list[Message]) -> tuple[list[Message], dict[str, Any]]:
        """Reset the env to the row's seed; returns its opening messages (the row's prompt is
        ignored: the env renders the task) and metadata naming the env."""
        observation, _ = self.env.reset(seed=self.seed)
        self.turns = 0
        self.total_reward = 0.0
        self.success = False
        self.truncation_reason = None
        return opening_messages(self.env.system_prompt, observation), {"env_id": self.env_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        observation, reward, terminated, truncated, info = self.env.step(action)
        out_of_turns = not (terminated or truncated) and self.turns >= self.max_turns
        done = terminated or truncated or out_of_turns
        self.total_reward += float(reward)
        if done:
            self.success = bool(info.get("success", False))
            if truncated:
                self.truncation_reason = info.get("truncation_reason", "env")
            elif out_of_turns:
                self.truncation_reason = self.limit_reason
        role = info.get("role", "user")
        messages = (
            []
            if done
            else observation_messages(
                observation, "user" if role == CONTINUE_ROLE else role, info.get("tool_outputs")
            )
        )
        return BaseTextEnvStepOutput(
            observations=messages,
            reward=float(reward),
            done=done,
            metadata=(
                {"success": self.success, "truncation_reason": self.truncation_reason}
                if done
                else {}
            ),
        )

    def get_metrics(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "return": self.total_reward,
            "success": float(self.success),
            "truncated": float(self.truncation_reason is not None),
        }

    def close(self) -> None:
        self.env.close()


def register_skyrl_env() -> None:
    """Register :class:`PalaestraTextEnv` in skyrl-gym as env class ``"palaestra"`` (once)."""
    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(ENV_CLASS, entry_point=PalaestraTextEnv)
