"""verl: an agent loop (``AgentLoopBase``) that plays palaestra envs, token-exact.

verl's agent-loop workers call ``run(sampling_params, **row)`` once per rollout and expect an
``AgentLoopOutput``: prompt ids, response ids (completions and env tokens), a response mask
(1 on generated tokens) and the rollout logprobs. :class:`PalaestraAgentLoop` plays the
env named by the row's ``extra_info`` with verl's own server manager as the policy: the
runner builds the token sequence (chat-template deltas, nothing re-tokenized), and the
episode's return is the ``reward_score``, so no reward function is needed. It registers as
agent ``"palaestra"`` when this module is imported; :func:`task_rows` makes the dataset rows
that select it. verl's workers import it through an agent-loop config file
(``actor_rollout_ref.rollout.agent.agent_loop_config_path``) naming
``palaestra.integrations.verl.PalaestraAgentLoop`` under ``name: palaestra``
(``examples/verl_agent_loop.py``).

The class exists when verl is installed (``pip install verl``, a GPU stack); :func:`play_row`
is the whole loop without verl (the tests drive it with a stand-in for verl's server manager).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from palaestra.agents.base import Action
from palaestra.integrations.trajectory import (
    EngineAgent,
    TokenTrajectory,
    play,
    split_episode,
    task_from_dict,
    task_prompts,
)

AGENT_NAME = "palaestra"


def task_rows(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """verl dataset rows, one per seed: the env's opening messages as ``prompt`` (for verl's
    length filter and logs), ``agent_name`` and the task in ``extra_info``."""
    return [
        {
            "data_source": env_id,
            "prompt": messages,
            "agent_name": AGENT_NAME,
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": task,
        }
        for task, messages in task_prompts(env_id, seeds, env_kwargs=env_kwargs)
    ]


async def play_row(
    server_manager: Any,
    tokenizer: Any,
    sampling_params: dict[str, Any],
    extra_info: Mapping[str, Any],
    *,
    response_length: int,
    max_turns: int | None = None,
) -> TokenTrajectory:
    """Play the row's task with ``server_manager.generate`` (verl's ``LLMServerClient``) as
    the policy; one request id per episode keeps its turns on one server (prefix cache)."""
    request_id = uuid.uuid4().hex

    async def generate(prompt_ids: list[int]) -> Action:
        output = await server_manager.generate(
            request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        ids = list(output.token_ids)
        return Action(agent.decode(ids), ids, list(output.log_probs or []), output.stop_reason)

    agent = EngineAgent(generate, tokenizer, name="verl")
    episode = await play(agent, task_from_dict(extra_info), max_turns=max_turns)
    return split_episode(episode, max_response_tokens=response_length)


try:
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
except ImportError:  # verl needs a GPU stack; play_row above is usable without it
    pass
else:

    @register(AGENT_NAME)
    class PalaestraAgentLoop(AgentLoopBase):
        """verl agent loop over palaestra envs (selected by rows with ``agent_name``
        ``"palaestra"``); ``multi_turn.max_assistant_turns`` caps the turns if set."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            rollout = self.rollout_config
            max_turns = getattr(getattr(rollout, "multi_turn", None), "max_assistant_turns", None)
            trajectory = await play_row(
                self.server_manager,
                self.tokenizer,
                sampling_params,
                kwargs["extra_info"],
                response_length=rollout.response_length,
                max_turns=max_turns,
            )
            return AgentLoopOutput(
                prompt_ids=trajectory.prompt_ids,
                response_ids=trajectory.response_ids,
                response_mask=trajectory.response_mask,
                response_logprobs=trajectory.response_logprobs,
                reward_score=trajectory.reward,
                num_turns=2 * trajectory.num_turns,  # task and observations, and completions
                metrics=AgentLoopMetrics(),
                extra_fields={},
            )
