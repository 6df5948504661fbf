"""OpenRLHF: an agent executor (``--train.agent_func_path``) that plays palaestra envs, token-exact.

OpenRLHF's multi-turn agents run through an ``AgentExecutor`` class in a user file, which
OpenRLHF builds with no arguments (it must subclass ``AgentExecutorBase``). Its rollout actor
calls ``execute(prompt=, label=, sampling_params=, max_length=, hf_tokenizer=,
llm_engine=, images=)`` and reads back the whole token sequence (``observation_tokens``),
the token ranges the policy generated (``action_ranges``), the rollout logprobs, the
reward and score, ``truncated`` and ``extra_logs`` (the keys of OpenRLHF's
``MultiTurnAgentExecutor``). OpenRLHF's own executor re-tokenizes the env's feedback text;
:class:`AgentExecutor` lets palaestra's runner build the sequence from chat-template deltas,
so the tokens the policy is trained on are the ones it saw.

``max_length`` is the budget of the whole sequence, kept while playing: each request asks
vLLM for at most the tokens left (and at most ``sampling_params.max_tokens`` when set), and
an observation that would not fit ends the episode, so OpenRLHF never has to cut the
sequence (which would keep the whole episode's reward for part of it). The dataset's label
names the task (:func:`task_rows`); the prompt column is only for OpenRLHF's filters and
logs. The agent file is one line::

    from palaestra.integrations.openrlhf import AgentExecutor  # noqa: F401

Subclass it there to set ``max_turns`` or ``template_kwargs`` (e.g.
``{"enable_thinking": False}``), since OpenRLHF passes no arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from copy import deepcopy
from typing import Any, ClassVar

from palaestra.agents.base import Action
from palaestra.integrations.trajectory import EpisodeRunner, task_from_dict, task_prompts
from palaestra.runner.episode import TOKEN_BUDGET_REASON
from palaestra.runner.tasks import Task

try:
    from openrlhf.utils.agent import AgentExecutorBase
except ImportError:  # OpenRLHF needs CUDA to install; the executor keeps its interface anyway
    AgentExecutorBase = object


def task_rows(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """OpenRLHF dataset rows (``--data.input_key prompt --data.label_key label``), one per seed: the
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

    ``max_turns`` caps episodes (default: the env's own limit); ``template_kwargs`` go to
    the chat template.
    """

    max_turns: ClassVar[int | None] = None
    template_kwargs: ClassVar[Mapping[str, Any]] = {}

    def __init__(self) -> None:
        self._runners: dict[tuple[int, int], EpisodeRunner] = {}

    def _runner(self, tokenizer: Any, max_length: int) -> EpisodeRunner:
        key = (id(tokenizer), max_length)
        if key not in self._runners:
            self._runners[key] = EpisodeRunner(
                tokenizer,
                max_turns=self.max_turns,
                max_episode_tokens=max_length,
                template_kwargs=self.template_kwargs,
            )
        return self._runners[key]

    async def execute(
        self,
        prompt: Any,
        label: str,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        """Play the task ``label`` names with ``llm_engine`` (OpenRLHF's vLLM actor)."""
        if images:
            raise ValueError("palaestra envs are text-only; this row has images")
        runner = self._runner(hf_tokenizer, max_length)
        want_logprobs = getattr(sampling_params, "logprobs", None) is not None

        async def generate(prompt_ids: list[int], max_tokens: int | None) -> Action:
            params = deepcopy(sampling_params)
            params.max_tokens = min(
                max_tokens or max_length, sampling_params.max_tokens or max_length
            )
            output = (await llm_engine.generate(prompt_ids, params)).outputs[0]
            ids = list(output.token_ids)
            logprobs = (
                [step[token].logprob for step, token in zip(output.logprobs, ids, strict=True)]
                if want_logprobs and output.logprobs
                else []
            )
            return Action(output.text, ids, logprobs, output.finish_reason)

        episode = await runner.play(task_from_label(label), generate)
        if episode.error is not None:
            raise RuntimeError(f"palaestra episode failed: {episode.error}")
        return {
            "prompt": prompt,
            "label": label,
            "images": images,
            "mm_train_inputs": None,
            "reward": episode.total_reward,
            "scores": episode.total_reward,
            "observation_tokens": episode.token_ids,
            "action_ranges": _policy_ranges(episode.loss_mask),
            "rollout_log_probs": episode.logprobs if want_logprobs else None,
            "truncated": episode.truncation_reason == TOKEN_BUDGET_REASON,
            "extra_logs": {
                "turns": float(episode.num_turns),
                "success": float(bool(episode.success)),
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
