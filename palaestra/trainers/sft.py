"""Supervised warm start on demonstrations: token-level episodes of an expert (e.g. an env's
oracle) collected through the runner, then next-token cross-entropy on the expert's tokens.

>>> demos = collect_demonstrations("game:GuessTheNumber-Easy-v0", range(64), tokenizer)
...                                                                      # doctest: +SKIP
>>> losses = train_sft(model, demos, steps=100, lr=3e-3)                 # doctest: +SKIP
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from palaestra.agents.base import Action, Agent, Conversation, next_action
from palaestra.agents.simple import OracleAgent
from palaestra.core.types import Episode
from palaestra.runner import Runner, make_tasks
from palaestra.trainers.batch import build_batch
from palaestra.trainers.update import sequence_logprobs


class DemonstrationAgent:
    """Wraps a text agent (default: the env's oracle) so that its actions come as tokens:
    the text's tokens followed by the end-of-turn token, which the policy must learn to emit."""

    def __init__(self, tokenizer: Any, expert: Agent | None = None) -> None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer needs an EOS (end-of-turn) token to end each action")
        self.tokenizer = tokenizer
        self.expert = expert or OracleAgent()
        self.name = "demonstration"

    async def act(self, conversation: Conversation) -> Action:
        action = await next_action(self.expert, conversation)
        ids = [*self.tokenizer.encode(action.text, add_special_tokens=False)]
        ids.append(self.tokenizer.eos_token_id)
        return Action(action.text, ids, [0.0] * len(ids), "stop")


def collect_demonstrations(
    env_id: str,
    seeds: Iterable[int],
    tokenizer: Any,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    expert: Agent | None = None,
) -> list[Episode]:
    """Token-level episodes of ``expert`` (default: the oracle) on ``env_id``, one per seed."""
    runner = Runner(DemonstrationAgent(tokenizer, expert), concurrency=16)
    episodes = runner.run(make_tasks([env_id], seeds, env_kwargs=env_kwargs))
    failed = [e for e in episodes if e.error is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} demonstrations failed, e.g. {failed[0].error}")
    return episodes


def train_sft(
    model: nn.Module,
    episodes: Sequence[Episode],
    *,
    steps: int,
    lr: float = 1e-3,
    batch_size: int = 16,
    pad_token_id: int = 0,
    seed: int = 0,
    stop_loss: float | None = None,
    stop_window: int = 5,
) -> list[float]:
    """Up to ``steps`` AdamW steps of cross-entropy on the episodes' policy tokens
    (``loss_mask``), each on ``batch_size`` episodes drawn without replacement (reshuffled
    every epoch). With ``stop_loss``, stops early once the mean loss of the last
    ``stop_window`` steps is at most ``stop_loss`` (a partial warm start).
    Returns the loss of every step taken."""
    if not episodes:
        raise ValueError("no demonstrations to train on")
    if stop_window < 1:
        raise ValueError(f"stop_window must be >= 1, got {stop_window}")
    batch = build_batch(
        episodes, [[0.0] * e.num_turns for e in episodes], pad_token_id=pad_token_id
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    rng = random.Random(seed)
    order: list[int] = []
    losses = []
    model.train()
    for _ in range(steps):
        if len(order) < batch_size:
            order += rng.sample(range(len(episodes)), len(episodes))
        rows, order = order[:batch_size], order[batch_size:]
        mini = batch.select(rows)
        logp, _ = sequence_logprobs(model, mini.input_ids, mini.attention_mask)
        loss = -(logp * mini.loss_mask).sum() / mini.loss_mask.sum().clamp(min=1.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if stop_loss is not None and _mean_of_last(losses, stop_window) <= stop_loss:
            break
    model.eval()
    return losses


def _mean_of_last(values: list[float], window: int) -> float:
    """Mean of the last ``window`` values; infinite while there are fewer."""
    return sum(values[-window:]) / window if len(values) >= window else float("inf")
