"""Token-level episodes in the shape token-level trainers read, and a framework's engine as an agent.

The runner records each episode as one token sequence (``palaestra.runner.tokens``): the
prompt, then each completion and each observation's chat-template delta, with a loss mask
that is 1 on policy tokens only. verl, TRL, OpenRLHF and SkyRL all want that sequence cut in
two: the prompt (everything before the first policy token) and the response (the rest, with
its mask and the engine's logprobs). :func:`split_episode` makes the cut;
:class:`EngineAgent` lets the runner generate with a framework's own token-in token-out
engine, so those trajectories are token-exact there too; :func:`play` plays one task.
Dataset rows name their task with :func:`task_prompts`' dicts, read back by :func:`task_from_dict`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from palaestra.agents.base import Action, Conversation
from palaestra.core.messages import Message, opening_messages
from palaestra.core.registry import make
from palaestra.core.types import Episode
from palaestra.runner.rollout import Runner
from palaestra.runner.tasks import Task

Generate = Callable[[list[int]], Awaitable[Action]]
"""Continues a token sequence: prompt ids in, the completion's ids (and logprobs) out."""


@dataclass(frozen=True, slots=True)
class TokenTrajectory:
    """One episode as prompt and response tokens.

    ``response_mask`` is 1 on tokens the policy produced and 0 on env and tool tokens;
    ``response_logprobs`` is the engine's logprob per response token (0.0 on env tokens).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    reward: float
    num_turns: int


def split_episode(episode: Episode, *, max_response_tokens: int | None = None) -> TokenTrajectory:
    """Cut a token-level episode at its first policy token; ``max_response_tokens`` truncates
    the response (frameworks with a fixed response length).

    Raises ``ValueError`` for an episode without token-level fields (played by an agent that
    has no tokenizer) or one that errored.
    """
    if episode.error is not None:
        raise ValueError(f"episode {episode.env_id} seed={episode.seed} errored: {episode.error}")
    if 1 not in episode.loss_mask:
        raise ValueError(
            "the episode has no policy tokens; play it with an agent that has a tokenizer "
            "(the runner records token ids only then)"
        )
    start = episode.loss_mask.index(1)
    end = len(episode.token_ids) if max_response_tokens is None else start + max_response_tokens
    return TokenTrajectory(
        prompt_ids=episode.token_ids[:start],
        response_ids=episode.token_ids[start:end],
        response_mask=episode.loss_mask[start:end],
        response_logprobs=episode.logprobs[start:end],
        reward=episode.total_reward,
        num_turns=episode.num_turns,
    )


class EngineAgent:
    """A palaestra agent that generates with a framework's engine: ``generate(prompt_ids)``
    returns the completion as an :class:`~palaestra.agents.base.Action`; ``tokenizer`` (with a
    chat template) is what the runner builds the token sequence with.

    >>> agent = EngineAgent(my_generate, tokenizer)  # doctest: +SKIP
    """

    def __init__(self, generate: Generate, tokenizer: Any, *, name: str = "engine"):
        self.generate = generate
        self.tokenizer = tokenizer
        self.name = name

    async def act(self, conversation: Conversation) -> Action:
        if conversation.prompt_ids is None:
            raise RuntimeError("EngineAgent needs token prompts (the runner sets them)")
        return await self.generate(list(conversation.prompt_ids))

    def decode(self, token_ids: list[int]) -> str:
        """The text of a completion (special tokens left out), for :class:`Action.text`."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


async def play(
    agent: Any,
    task: Task,
    *,
    max_turns: int | None = None,
    max_episode_tokens: int | None = None,
) -> Episode:
    """Play one task to its end with ``agent`` (any palaestra agent with a tokenizer, e.g.
    :class:`EngineAgent`); env and agent errors are recorded in ``Episode.error``."""
    runner = Runner(
        agent, concurrency=1, max_turns=max_turns, max_episode_tokens=max_episode_tokens
    )
    return await runner.run_episode(task)


def task_prompts(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> Iterator[tuple[dict[str, Any], list[Message]]]:
    """For each seed: the task as a JSON-ready dict (``env_id``, ``seed``, and ``env_kwargs``
    unless there are none: Parquet cannot store an empty struct) and the env's opening
    messages (what a framework shows in logs and length filters)."""
    kwargs = dict(env_kwargs or {})
    env = make(env_id, **kwargs)
    try:
        for seed in seeds:
            observation, _ = env.reset(seed=seed)
            task = {"env_id": env_id, "seed": seed, **({"env_kwargs": kwargs} if kwargs else {})}
            yield task, opening_messages(env.system_prompt, observation)
    finally:
        env.close()


def task_from_dict(data: Mapping[str, Any]) -> Task:
    """The :class:`~palaestra.runner.tasks.Task` a row's task dict names (see
    :func:`task_prompts`)."""
    if "env_id" not in data:
        raise KeyError(f"no 'env_id' in {dict(data)!r}; build dataset rows with task_prompts()")
    seed = data.get("seed")  # may come back from Parquet as a numpy integer
    return Task(
        data["env_id"], None if seed is None else int(seed), dict(data.get("env_kwargs") or {})
    )
