"""OpenRLHF: an agent executor (``--agent_func_path``) that plays palaestra envs, token-exact.

OpenRLHF's multi-turn agents run through an ``AgentExecutor`` class in a user file: its
``execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine)`` returns
the whole token sequence (``observation_tokens``), the token ranges the policy generated
(``action_ranges``), the rollout logprobs and the reward (the interface of OpenRLHF's
``MultiTurnAgentExecutor``, which OpenRLHF builds with no arguments). OpenRLHF's own
``MultiTurnAgentExecutor`` re-tokenizes the env's feedback text; :class:`AgentExecutor`
instead lets palaestra's runner build the sequence from chat-template deltas, so the tokens
the policy is trained on are the ones it saw. The dataset's label names the task
(:func:`task_rows`); the prompt column is only for OpenRLHF's filters and logs. The agent
file is one line::

    from palaestra.integrations.openrlhf import AgentExecutor  # noqa: F401

OpenRLHF itself is not importable on CPU-only machines (it builds DeepSpeed and pins a CUDA
vLLM), so :class:`AgentExecutor` subclasses OpenRLHF's ``AgentExecutorBase`` when it is
installed and keeps its interface either way; the tests drive it with an engine that
answers as vLLM's ``AsyncLLMEngine`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from copy import deepcopy
from typing import Any

from palaestra.agents.base import Action
from palaestra.integrations.trajectory import EngineAgent, play, task_from_dict, task_prompts
from palaestra.runner.tasks import Task

try:
    from openrlhf.utils.agent import AgentExecutorBase
except ImportError:  # OpenRLHF needs CUDA to install; the executor keeps its interface anyway
    AgentExecutorBase = object


def task_rows(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """OpenRLHF dataset rows (``--input_key prompt --label_key label``), one per seed: the
    env's opening messages as ``prompt`` and the task as a JSON ``label``."""
    return [
        {"prompt": messages, "label": json.dumps(task)}
        for task, messages in task_prompts(env_id, seeds, env_kwargs=env_kwargs)
    ]


def task_from_label(label: str) -> Task:
    """The task a row's JSON label names (see :func:`task_rows`)."""
    try:
        return task_from_dict(json.loads(label))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(
            f"label {label!r} does not name a palaestra task; build rows with task_rows()"
        ) from exc


class AgentExecutor(AgentExecutorBase):  # type: ignore[misc,valid-type]
    """OpenRLHF agent executor over palaestra envs (see the module docstring).

    ``max_turns`` caps episodes (default: the env's own limit); ``max_length`` (OpenRLHF's
    budget for the whole sequence) ends an episode too, and each completion may use what
    is left of it.
    """

    def __init__(self, max_turns: int | None = None):
        self.max_turns = max_turns

    async def execute(
        self,
        prompt: Any,
        label: str,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
    ) -> dict[str, Any]:
        """Play the task ``label`` names with ``llm_engine`` (vLLM) as the policy."""
        want_logprobs = getattr(sampling_params, "logprobs", None) is not None

        async def generate(prompt_ids: list[int]) -> Action:
            params = deepcopy(sampling_params)
            params.max_tokens = max(1, max_length - len(prompt_ids))
            output = (await llm_engine.generate(prompt_ids, params)).outputs[0]
            ids = list(output.token_ids)
            logprobs = (
                [step[token].logprob for step, token in zip(output.logprobs, ids, strict=True)]
                if want_logprobs and output.logprobs
                else []
            )
            return Action(output.text, ids, logprobs, output.finish_reason)

        agent = EngineAgent(generate, hf_tokenizer, name="openrlhf")
        episode = await play(
            agent, task_from_label(label), max_turns=self.max_turns, max_episode_tokens=max_length
        )
        if episode.error is not None:
            raise RuntimeError(f"palaestra episode failed: {episode.error}")
        import torch  # OpenRLHF's scores and logs are tensors

        return {
            "prompt": prompt,
            "label": label,
            "reward": episode.total_reward,
            "scores": torch.tensor(episode.total_reward),
            "observation_tokens": episode.token_ids,
            "action_ranges": _policy_ranges(episode.loss_mask),
            "rollout_log_probs": episode.logprobs if want_logprobs else None,
            "extra_logs": {
                "turns": torch.tensor(float(episode.num_turns)),
                "success": torch.tensor(float(bool(episode.success))),
            },
        }


def _policy_ranges(loss_mask: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of 1s in ``loss_mask``."""
    ranges: list[tuple[int, int]] = []
    start = None
    for position, bit in enumerate([*loss_mask, 0]):
        if bit and start is None:
            start = position
        elif not bit and start is not None:
            ranges.append((start, position))
            start = None
    return ranges
