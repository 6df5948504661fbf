"""TRL: palaestra verifiers and envs as ``GRPOTrainer`` reward functions, and a multi-turn
``rollout_func`` that plays palaestra envs.

Single turn. TRL calls each reward function as ``fn(prompts=..., completions=..., **columns)``
where every dataset column arrives as a list aligned with ``completions``, and expects one
float per completion. :func:`as_trl_reward` does that plumbing for a verifier (the row's
columns renamed by ``column_map``, e.g. ``answer`` -> ``gold``); :func:`env_reward` scores a
completion as one step of a palaestra env on the row's task (:func:`prompt_dataset`).

>>> from palaestra.verifiers import math
>>> reward = as_trl_reward(math.verify)
>>> reward(completions=[r"\\boxed{4}", r"\\boxed{5}"], answer=["4", "4"])
[1.0, 0.0]

Multi turn. :class:`EnvRollout` is a ``rollout_func``: TRL hands it the batch's prompts (here
each names a task, :func:`task_dataset`) and it plays every episode with the trainer's own
model through palaestra's runner, tools included. It returns the token-exact sequences
(``prompt_ids``: the opening messages; ``completion_ids``: completions and env tokens), the
sampling logprobs, an ``env_mask`` that TRL multiplies into its loss mask (0 on env and tool
tokens) and each episode's return, which :func:`episode_return` passes on as the reward::

    trainer = GRPOTrainer(model, reward_funcs=episode_return, args=GRPOConfig(...),
                          train_dataset=task_dataset("game:GuessTheNumber-v0", range(512)),
                          processing_class=tokenizer, rollout_func=EnvRollout())
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from palaestra.agents.base import Action
from palaestra.core.env import Env
from palaestra.core.registry import make
from palaestra.core.types import Episode
from palaestra.integrations.trajectory import (
    EpisodeRunner,
    split_episode,
    task_from_dict,
    task_prompts,
)
from palaestra.runner.tasks import Task
from palaestra.verifiers.rubric import accepted_kwargs

TrlRewardFn = Callable[..., list[float]]


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a TRL completion: a string, or the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    messages = list(completion)
    if not messages:
        return ""
    content = messages[-1].get("content", "")
    if isinstance(content, list):  # multimodal parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return str(content)


def as_trl_reward(
    verifier: Callable[..., float],
    *,
    column_map: Mapping[str, str] | None = None,
    name: str | None = None,
) -> TrlRewardFn:
    """Wrap ``verifier(completion, **context) -> float`` as a TRL reward function.

    ``column_map`` renames dataset columns to the verifier's keyword names; the default maps
    ``answer`` and ``solution`` to ``gold``. Columns the verifier does not accept are ignored,
    so extra dataset fields are harmless. ``name`` is what TRL logs (default: the verifier's).
    """
    if inspect.iscoroutinefunction(verifier):
        raise TypeError("as_trl_reward needs a sync verifier; TRL calls reward functions sync")
    mapping = dict(column_map) if column_map is not None else {"answer": "gold", "solution": "gold"}

    def reward(
        completions: Sequence[Any], prompts: Sequence[Any] | None = None, **columns: Any
    ) -> list[float]:
        n = len(completions)
        rows: list[dict[str, Any]] = [{} for _ in range(n)]
        for column, values in columns.items():
            key = mapping.get(column, column)
            if isinstance(values, list | tuple) and len(values) == n:
                for row, value in zip(rows, values, strict=True):
                    row[key] = value
        if prompts is not None:
            for row, prompt in zip(rows, prompts, strict=False):
                row.setdefault("prompt", prompt)
        return [
            float(verifier(completion_text(c), **accepted_kwargs(verifier, row)))
            for c, row in zip(completions, rows, strict=True)
        ]

    reward.__name__ = name or getattr(verifier, "__name__", "palaestra_reward")
    reward.__qualname__ = reward.__name__
    return reward


def prompt_dataset(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> Any:
    """A ``datasets.Dataset`` for single-turn training with :func:`env_reward`: the env's
    opening messages as a conversational ``prompt``, and the task in a ``task`` column."""
    from datasets import Dataset

    rows = [
        {"prompt": messages, "task": json.dumps(task)}
        for task, messages in task_prompts(env_id, seeds, env_kwargs=env_kwargs)
    ]
    return Dataset.from_list(rows)


def env_reward(completions: Sequence[Any], task: Sequence[str], **_: Any) -> list[float]:
    """TRL reward function: each completion's reward as the first action on its row's task
    (reset with the task's seed, one step). Rows come from :func:`prompt_dataset`."""
    envs: dict[str, Env] = {}
    rewards = []
    for completion, task_json in zip(completions, task, strict=True):
        spec = task_from_dict(json.loads(task_json))
        key = json.dumps([spec.env_id, dict(spec.env_kwargs)], sort_keys=True)
        env = envs.get(key)
        if env is None:
            env = envs[key] = make(spec.env_id, **spec.env_kwargs)
        env.reset(seed=spec.seed)
        rewards.append(float(env.step(completion_text(completion))[1]))
    for env in envs.values():
        env.close()
    return rewards


def task_dataset(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> Any:
    """A ``datasets.Dataset`` for :class:`EnvRollout`: each ``prompt`` is a task as JSON
    (env id, seed, env kwargs), which the rollout function plays."""
    from datasets import Dataset

    rows = [
        {"prompt": json.dumps(task)}
        for task, _ in task_prompts(env_id, seeds, env_kwargs=env_kwargs)
    ]
    return Dataset.from_list(rows)


def episode_return(
    completions: Sequence[Any], episode_return: Sequence[float], **_: Any
) -> list[float]:
    """TRL reward function that passes on the episode returns :class:`EnvRollout` reported."""
    return [float(value) for value in episode_return]


class EnvRollout:
    """A ``GRPOTrainer`` ``rollout_func`` that plays palaestra envs with the trainer's model.

    Each prompt is a task from :func:`task_dataset`; TRL repeats a prompt once per generation
    of its group. Completions come from TRL's own generation (the function its multi-turn
    tool loop calls: ``transformers`` or vLLM, whichever the trainer uses), so the trainer's
    sampling options (``temperature``, ``top_p``, ``top_k``, ``min_p``,
    ``repetition_penalty``, ``generation_kwargs``) apply as in any TRL run, and the turns of
    all episodes in flight are generated as one batch. ``chat_template_kwargs`` go to the
    chat template. ``max_completion_length`` is the budget of an episode's whole completion
    (its turns and the env's tokens between them, as in TRL's tool loop), kept while playing:
    an episode that would outgrow it ends, truncated, with the rewards of what it kept.
    ``max_turns`` caps episodes (default: the env's own limit); ``mask_observations=False``
    trains on env and tool tokens too.
    """

    def __init__(self, *, max_turns: int | None = None, mask_observations: bool = True):
        self.max_turns = max_turns
        self.mask_observations = mask_observations
        self._runner: EpisodeRunner | None = None

    def __call__(self, prompts: Sequence[str], trainer: Any) -> dict[str, list[Any]]:
        runner = self._episode_runner(trainer)
        tasks = [task_from_dict(json.loads(prompt)) for prompt in prompts]
        batch = _TurnBatch(trainer, runner, playing=len(tasks))
        episodes = asyncio.run(_play_together(runner, tasks, batch))
        trajectories = [split_episode(episode) for episode in episodes]
        return {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.response_ids for t in trajectories],
            "logprobs": [t.response_logprobs for t in trajectories],
            "env_mask": [t.response_mask for t in trajectories],
            "episode_return": [t.reward for t in trajectories],
            "success": [t.success for t in trajectories],
            "truncation_reason": [t.truncation_reason for t in trajectories],
        }

    def _episode_runner(self, trainer: Any) -> EpisodeRunner:
        if not hasattr(trainer, "_generate_single_turn"):
            raise RuntimeError(
                f"EnvRollout generates with GRPOTrainer._generate_single_turn (trl >= 1.16), "
                f"which {type(trainer).__name__} lacks: `pip install 'trl>=1.16'`"
            )
        if self._runner is None:
            self._runner = EpisodeRunner(
                trainer.processing_class,
                max_turns=self.max_turns,
                max_response_tokens=trainer.args.max_completion_length,
                template_kwargs=trainer.args.chat_template_kwargs,
                mask_observations=self.mask_observations,
            )
        return self._runner


async def _play_together(
    runner: EpisodeRunner, tasks: Sequence[Task], batch: _TurnBatch
) -> list[Episode]:
    async def play(task: Task) -> Episode:
        try:
            return await runner.play(task, batch.generate)
        finally:
            batch.leave()

    return list(await asyncio.gather(*(play(task) for task in tasks)))


class _TurnBatch:
    """Generates the next turn of every episode in flight as one batch, with TRL's own
    ``GRPOTrainer._generate_single_turn`` (what TRL's tool loop calls for each round).

    Episodes that are not waiting for a completion are stepping their env; the batch goes
    out once every episode still playing has asked, so each round is one generation call.
    """

    def __init__(self, trainer: Any, runner: EpisodeRunner, *, playing: int):
        self.trainer = trainer
        self.runner = runner
        self.playing = playing
        self.waiting: list[tuple[list[int], asyncio.Future[Action]]] = []

    async def generate(self, prompt_ids: list[int], max_tokens: int | None) -> Action:
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((prompt_ids, future))
        self._send_when_all_asked()
        return await future

    def leave(self) -> None:
        """An episode ended; the others may be all that is left to wait for."""
        self.playing -= 1
        self._send_when_all_asked()

    def _send_when_all_asked(self) -> None:
        if not self.waiting or len(self.waiting) < self.playing:
            return
        batch, self.waiting = self.waiting, []
        try:
            completions, logprobs = self.trainer._generate_single_turn(
                [prompt for prompt, _ in batch], None, {}, 1
            )
        except Exception as exc:  # every waiting episode hears of it
            for _, future in batch:
                future.set_exception(exc)
            return
        eos = set(self.trainer.eos_token_ids)
        for position, (_, future) in enumerate(batch):
            ids = list(completions[position])
            row_logprobs = list(logprobs[position]) if logprobs is not None else []
            finish = "stop" if ids and ids[-1] in eos else "length"
            future.set_result(Action(self.runner.decode(ids), ids, row_logprobs, finish))
