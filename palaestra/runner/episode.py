"""Playing one episode: reset, then agent action and env step until the episode ends.

The player records everything an episode needs for evaluation and training: the turns, the
messages (built from the turns by :mod:`palaestra.core.messages`), and, with a
tokenizer-backed agent, the token-exact sequence (:mod:`palaestra.runner.tokens`).

Turn budget: ``max_turns`` of the runner if given, else the env's ``max_turns`` (every step
counts, tool calls included), else :data:`DEFAULT_MAX_TURNS`. The truncation reason says
which limit ended the episode: the env's own (``info["truncation_reason"]``, ``"turn_limit"``
when its ``max_turns`` is reached, ``"env"`` otherwise), the runner's cap
(``"runner_max_turns"``) or the token budget (``"token_budget"``).

Token budget: ``max_episode_tokens`` bounds the whole sequence, ``max_response_tokens`` what
follows the prompt. It is kept while playing, never by cutting the sequence afterwards: the
agent is told the room left (``Conversation.max_tokens``), a longer completion is cut to it
(and the env steps on what is kept), and an observation that would leave no room for another
completion ends the episode before it is appended. So the episode's rewards are those of the
actions in its sequence.
"""

from __future__ import annotations

from typing import Any

from palaestra.agents.base import Action, Agent, Conversation, acts_inline, resolve_action
from palaestra.core.env import Env
from palaestra.core.messages import observation_messages, opening_messages
from palaestra.core.types import Episode, Turn
from palaestra.core.wrappers import TURN_LIMIT_REASON
from palaestra.runner.hosts import EnvHandle
from palaestra.runner.tasks import Task
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder

DEFAULT_MAX_TURNS = 64
"""Turn cap for envs that set no ``max_turns`` of their own and runs that give none."""

RUNNER_LIMIT_REASON = "runner_max_turns"
TOKEN_BUDGET_REASON = "token_budget"

_AGENT_SEED_SALT = 0x5A6E7
"""Keeps agent rngs apart from env rngs: numpy seeds ``s`` and ``(s, 0)`` give the same stream."""


class EpisodePlayer:
    """Plays episodes of any env handle with one agent.

    ``mask_observations=False`` puts observation (and tool result) tokens in the loss too;
    ``template_kwargs`` go to the chat template; the token budgets are the module's.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        max_turns: int | None = None,
        max_episode_tokens: int | None = None,
        max_response_tokens: int | None = None,
        mask_observations: bool = True,
        template_kwargs: dict[str, Any] | None = None,
    ):
        self.agent = agent
        self.acts_inline = acts_inline(agent)
        self.tokenizer = getattr(agent, "tokenizer", None)
        for name, budget in [
            ("max_episode_tokens", max_episode_tokens),
            ("max_response_tokens", max_response_tokens),
        ]:
            if budget is not None and self.tokenizer is None:
                raise ValueError(f"{name} needs an agent with a tokenizer")
            if budget is not None and budget < 1:
                raise ValueError(f"{name} must be >= 1, got {budget}")
        self.max_turns = max_turns
        self.max_episode_tokens = max_episode_tokens
        self.max_response_tokens = max_response_tokens
        self.mask_observations = mask_observations
        self.template_kwargs = template_kwargs
        self._recorders: dict[tuple, TokenRecorder] = {}

    async def play(self, env: EnvHandle, task: Task, episode: Episode) -> None:
        """Play ``task`` on ``env`` to its end, filling ``episode``; env and agent errors
        propagate (the runner records them)."""
        inline = env.steps_inline
        if inline:
            observation, info = env.reset(seed=task.seed, options=task.options)  # type: ignore[attr-defined]
        else:
            observation, info = await env.areset(seed=task.seed, options=task.options)
        episode.task = observation
        episode.problem_id = info.get("problem_id")
        episode.system_prompt = env.system_prompt
        messages = opening_messages(env.system_prompt, observation)
        turns = episode.turns
        conversation = Conversation(
            messages,
            env.tools,
            turns=turns,
            env=env if isinstance(env, Env) else None,
            seed=None if task.seed is None else (task.seed, task.sample_index, _AGENT_SEED_SALT),
            tool_format=env.tool_format,
        )
        recorder = None if self.tokenizer is None else self._recorder(env.tools)
        token_limit = None
        if recorder is not None:
            conversation.prompt_ids = recorder.start(episode, messages)
            token_limit = self._token_limit(len(episode.token_ids))
            if token_limit is not None and len(episode.token_ids) >= token_limit:
                episode.truncation_reason = TOKEN_BUDGET_REASON  # no room for a first action
                episode.success = False
                return
        limit, limit_reason = self._turn_limit(env)
        act = self.agent.act
        inline_act = self.acts_inline
        for turn_number in range(limit):
            if token_limit is not None:
                conversation.max_tokens = token_limit - len(episode.token_ids)
            action = act(conversation) if inline_act else await act(conversation)
            if not isinstance(action, Action):
                action = await resolve_action(action)
            if recorder is not None:
                if token_limit is not None:
                    action = recorder.fit(action, conversation.max_tokens)
                completion = recorder.add_action(episode, action, turn_number)
            if inline:
                observation, reward, terminated, truncated, info = env.step(action.text)  # type: ignore[attr-defined]
            else:
                observation, reward, terminated, truncated, info = await env.astep(action.text)
            turns.append(
                Turn(
                    action.text,
                    observation,
                    float(reward),
                    terminated,
                    truncated,
                    info,
                    info.get("role", "user"),
                    action.token_ids,
                    action.logprobs,
                    action.finish_reason,
                )
            )
            if terminated or truncated:
                if truncated:
                    episode.truncation_reason = info.get("truncation_reason", "env")
                break
            if turn_number == limit - 1:
                _truncate(episode, limit_reason)
                break
            if recorder is not None:
                new = observation_messages(
                    observation, turns[-1].observation_role, info.get("tool_outputs")
                )
                prompt_ids = recorder.add_observation(
                    episode, new, completion, turn_number, limit=token_limit
                )
                if prompt_ids is None:
                    _truncate(episode, TOKEN_BUDGET_REASON)
                    break
                conversation.prompt_ids = prompt_ids
        episode.success = bool(info.get("success", False))
        metrics = info.get("metrics")
        if metrics:
            episode.metrics = dict(metrics)

    def _token_limit(self, prompt_length: int) -> int | None:
        """The most tokens the episode's sequence may hold, given its prompt's length."""
        limits = [self.max_episode_tokens]
        if self.max_response_tokens is not None:
            limits.append(prompt_length + self.max_response_tokens)
        return min((limit for limit in limits if limit is not None), default=None)

    def _turn_limit(self, env: EnvHandle) -> tuple[int, str]:
        if self.max_turns is not None:
            return self.max_turns, RUNNER_LIMIT_REASON
        if env.max_turns is not None:
            return env.max_turns, TURN_LIMIT_REASON
        return DEFAULT_MAX_TURNS, RUNNER_LIMIT_REASON

    def _recorder(self, tools: list[dict[str, Any]]) -> TokenRecorder:
        key = (id(self.tokenizer), repr(tools))
        recorder = self._recorders.get(key)
        if recorder is None:
            chat = ChatTokenizer(self.tokenizer, tools=tools, template_kwargs=self.template_kwargs)
            recorder = TokenRecorder(chat, mask_observations=self.mask_observations)
            self._recorders[key] = recorder
        return recorder


def _truncate(episode: Episode, reason: str) -> None:
    episode.turns[-1].truncated = True
    episode.truncation_reason = reason
