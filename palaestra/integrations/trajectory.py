"""Token-level episodes in the shape token-level trainers read, played with a framework's engine.

The runner records each episode as one token sequence (``palaestra.runner.tokens``): the
prompt, then each completion and each observation's chat-template delta, with a loss mask
that is 1 on policy tokens only. verl, TRL, OpenRLHF and SkyRL all want that sequence cut in
two: the prompt (everything before the first policy token) and the response (the rest, with
its mask and the engine's logprobs). :func:`split_episode` makes the cut.

:class:`EpisodeRunner` plays episodes for an adapter: one palaestra
:class:`~palaestra.runner.rollout.Runner` (its envs and chat-template renderings reused from
episode to episode), the framework's budgets kept while playing, and each episode generated
by the ``generate`` function the adapter passes with it (the framework's engine, sampling
settings and request id of that call), so the sequence is token-exact there too.
Dataset rows name their task with :func:`task_prompts`' dicts, read back by :func:`task_from_dict`.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from palaestra.agents.base import Action, Conversation
from palaestra.core.messages import Message, opening_messages
from palaestra.core.registry import make
from palaestra.core.types import Episode
from palaestra.runner.hosts import LocalEnvHost
from palaestra.runner.rollout import Runner
from palaestra.runner.tasks import Task

Generate = Callable[[list[int], int | None], Awaitable[Action]]
"""Continues a token sequence: the prompt ids and the most tokens the completion may have
(None: no budget) in, the completion's ids (and logprobs) out."""


@dataclass(frozen=True, slots=True)
class TokenTrajectory:
    """One episode as prompt and response tokens.

    ``response_mask`` is 1 on tokens the policy produced and 0 on env and tool tokens;
    ``response_logprobs`` is the engine's logprob per response token (0.0 on env tokens).
    ``truncation_reason`` says which budget ended the episode (None when the env ended it).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    reward: float
    num_turns: int
    success: bool
    truncation_reason: str | None


def split_episode(episode: Episode) -> TokenTrajectory:
    """Cut a token-level episode at its first policy token.

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
    return TokenTrajectory(
        prompt_ids=episode.token_ids[:start],
        response_ids=episode.token_ids[start:],
        response_mask=episode.loss_mask[start:],
        response_logprobs=episode.logprobs[start:],
        reward=episode.total_reward,
        num_turns=episode.num_turns,
        success=bool(episode.success),
        truncation_reason=episode.truncation_reason,
    )


_episode_generate: contextvars.ContextVar[Generate] = contextvars.ContextVar("generate")
"""The ``generate`` of the episode the current asyncio task plays (set by EpisodeRunner.play)."""


class _EngineAgent:
    """The runner's agent: each episode's completions come from the ``generate`` its
    :meth:`EpisodeRunner.play` call was given."""

    name = "engine"

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    async def act(self, conversation: Conversation) -> Action:
        if conversation.prompt_ids is None:
            raise RuntimeError("the engine agent needs token prompts (the runner sets them)")
        return await _episode_generate.get()(list(conversation.prompt_ids), conversation.max_tokens)


class EpisodeRunner:
    """Plays tasks for a framework's adapter with one reused palaestra runner.

    ``tokenizer`` (with a chat template) builds the token sequence; ``max_turns`` caps the
    turns (default: the env's own limit); ``max_episode_tokens`` bounds the sequence and
    ``max_response_tokens`` what follows the prompt, kept while playing (the truncation
    reason says which limit ended an episode); ``template_kwargs`` go to the chat template
    (e.g. ``{"enable_thinking": False}``).

    >>> runner = EpisodeRunner(tokenizer, max_response_tokens=1024)  # doctest: +SKIP
    >>> episode = await runner.play(task, generate)  # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_turns: int | None = None,
        max_episode_tokens: int | None = None,
        max_response_tokens: int | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        mask_observations: bool = True,
    ):
        self._host = LocalEnvHost()
        self.runner = Runner(
            _EngineAgent(tokenizer),
            host=self._host,
            max_turns=max_turns,
            max_episode_tokens=max_episode_tokens,
            max_response_tokens=max_response_tokens,
            template_kwargs=dict(template_kwargs or {}),
            mask_observations=mask_observations,
        )

    async def play(self, task: Task, generate: Generate) -> Episode:
        """Play ``task`` to its end, each completion from ``generate``; env and engine errors
        are recorded in ``Episode.error``. Concurrent calls are independent."""
        token = _episode_generate.set(generate)
        try:
            return await self.runner.run_episode(task)
        finally:
            _episode_generate.reset(token)

    def decode(self, token_ids: list[int]) -> str:
        """The text of a completion (special tokens left out), for :class:`Action.text`."""
        return self.runner.agent.tokenizer.decode(token_ids, skip_special_tokens=True)

    def close(self) -> None:
        """Close the envs kept for reuse."""
        self._host.close()


_shared_runners: dict[tuple[int, str], EpisodeRunner] = {}
_shared_runners_lock = threading.Lock()


def shared_episode_runner(tokenizer: Any, **settings: Any) -> EpisodeRunner:
    """The process's :class:`EpisodeRunner` for ``tokenizer`` and ``settings`` (its keyword
    arguments), built on first use; for frameworks that build a new agent object per
    episode (verl). Their envs are closed at exit."""
    key = (id(tokenizer), json.dumps(settings, sort_keys=True, default=repr))
    with _shared_runners_lock:
        runner = _shared_runners.get(key)
        if runner is None:
            runner = _shared_runners[key] = EpisodeRunner(tokenizer, **settings)
    return runner


@atexit.register
def _close_shared_runners() -> None:
    with _shared_runners_lock:
        for runner in _shared_runners.values():
            runner.close()
        _shared_runners.clear()


def task_prompts(
    env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None
) -> Iterator[tuple[dict[str, Any], list[Message]]]:
    """For each seed: the task as a dict (``env_id``, ``seed``, and ``env_kwargs`` as a JSON
    string) and the env's opening messages (what a framework shows in logs and length
    filters).

    The kwargs are a string, not a nested dict, because Parquet (and ``datasets``) merge the
    dicts of all rows into one struct type: a file mixing envs with different kwargs would
    give every row every key, the missing ones as None.
    """
    kwargs = dict(env_kwargs or {})
    kwargs_json = _kwargs_json(kwargs)
    env = make(env_id, **kwargs)
    try:
        for seed in seeds:
            observation, _ = env.reset(seed=seed)
            task = {"env_id": env_id, "seed": seed, "env_kwargs": kwargs_json}
            yield task, opening_messages(env.system_prompt, observation)
    finally:
        env.close()


def _kwargs_json(kwargs: Mapping[str, Any]) -> str:
    try:
        return json.dumps(kwargs, sort_keys=True)
    except TypeError as exc:
        raise TypeError(
            f"env_kwargs must be JSON values to go into dataset rows ({exc}); register an "
            "env id that builds the objects instead"
        ) from exc


def task_from_dict(data: Mapping[str, Any]) -> Task:
    """The :class:`~palaestra.runner.tasks.Task` a row's task dict names (see
    :func:`task_prompts`; ``env_kwargs`` may also be a dict)."""
    if "env_id" not in data:
        raise KeyError(f"no 'env_id' in {dict(data)!r}; build dataset rows with task_prompts()")
    seed = data.get("seed")  # may come back from Parquet as a numpy integer
    kwargs = data.get("env_kwargs") or {}
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    return Task(data["env_id"], None if seed is None else int(seed), dict(kwargs))
