"""verl: an agent loop (``AgentLoopBase``) that plays palaestra envs, token-exact.

verl's ``AgentLoopWorker`` builds an agent loop per rollout (``hydra.utils.instantiate`` of
the registered class) and awaits ``run(sampling_params, **row)``, where ``row`` is the
dataset row as ``RLHFDataset`` returns it; it expects an ``AgentLoopOutput``: prompt ids,
response ids (completions and env tokens), a response mask (1 on generated tokens), the
rollout logprobs and, here, the ``reward_score``. :class:`PalaestraAgentLoop` plays the env
named by the row's ``extra_info`` with verl's server manager as the policy. The runner
builds the token sequence (chat-template deltas, nothing re-tokenized) and keeps verl's
budgets while playing: ``rollout.response_length`` bounds the response (each request asks
for at most the tokens left, and an observation that would not fit ends the episode), and
``rollout.multi_turn.max_assistant_turns`` / ``max_user_turns`` cap the turns. So the
episode's return, the ``reward_score``, is the reward of exactly the response verl trains
on. ``data.apply_chat_template_kwargs`` (e.g. ``enable_thinking``) go to the chat template;
the row's sampling params go to every request.

It registers as agent ``"palaestra"`` when this module is imported; :func:`task_rows` makes
the dataset rows that select it. verl's workers import it through an agent-loop config file
(``actor_rollout_ref.rollout.agent.agent_loop_config_path``) naming
``palaestra.integrations.verl.PalaestraAgentLoop`` under ``name: palaestra``
(``examples/verl_agent_loop.py``). The class exists when verl is importable; :func:`play_row`
is its body.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from palaestra.agents.base import Action
from palaestra.integrations.trajectory import (
    EpisodeRunner,
    TokenTrajectory,
    shared_episode_runner,
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


def runner_settings(rollout: Any, template_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """:class:`EpisodeRunner` settings from verl's rollout config: the response budget and
    the turn caps (``max_user_turns`` observations allow one more assistant turn)."""
    multi_turn = getattr(rollout, "multi_turn", None)
    caps = []
    if assistant_turns := getattr(multi_turn, "max_assistant_turns", None):
        caps.append(int(assistant_turns))
    if user_turns := getattr(multi_turn, "max_user_turns", None):
        caps.append(int(user_turns) + 1)
    return {
        "max_response_tokens": int(rollout.response_length),
        "max_turns": min(caps, default=None),
        "template_kwargs": dict(template_kwargs or {}),
    }


async def play_row(
    runner: EpisodeRunner,
    server_manager: Any,
    sampling_params: Mapping[str, Any],
    extra_info: Mapping[str, Any],
) -> TokenTrajectory:
    """Play the row's task with ``server_manager.generate`` (verl's ``LLMServerClient``) as
    the policy; one request id per episode keeps its turns on one server (prefix cache)."""
    request_id = uuid.uuid4().hex

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Action:
        params = dict(sampling_params)
        if max_tokens is not None:
            params["max_tokens"] = min(max_tokens, params.get("max_tokens") or max_tokens)
        output = await server_manager.generate(
            request_id=request_id, prompt_ids=prompt_ids, sampling_params=params
        )
        ids = list(output.token_ids)
        return Action(runner.decode(ids), ids, list(output.log_probs or []), output.stop_reason)

    episode = await runner.play(task_from_dict(extra_info), generate)
    return split_episode(episode)


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
        ``"palaestra"``); see the module docstring for the budgets it keeps.

        Reads only what ``AgentLoopBase`` has set since verl's January 2026 releases
        (``config``, ``server_manager``, ``tokenizer``, ``apply_chat_template_kwargs``).
        """

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            rollout = self.config.actor_rollout_ref.rollout
            settings = runner_settings(rollout, self.apply_chat_template_kwargs)
            runner = shared_episode_runner(self.tokenizer, **settings)
            trajectory = await play_row(
                runner, self.server_manager, sampling_params, kwargs["extra_info"]
            )
            return AgentLoopOutput(
                prompt_ids=trajectory.prompt_ids,
                response_ids=trajectory.response_ids,
                response_mask=trajectory.response_mask,
                response_logprobs=trajectory.response_logprobs,
                reward_score=trajectory.reward,
                num_turns=2 * trajectory.num_turns,  # task and observations, and completions
                metrics=AgentLoopMetrics(),
                extra_fields={
                    "success": trajectory.success,
                    "truncation_reason": trajectory.truncation_reason,
                },
            )
