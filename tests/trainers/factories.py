"""Hand-built episodes with token-level fields, for trainer tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from palaestra.core.types import Episode, Turn


def episode(
    rewards: Sequence[float],
    *,
    group_id: int | str | None = None,
    success: bool | None = None,
    tokens_per_turn: int = 2,
    prompt_tokens: int = 2,
) -> Episode:
    """An episode with ``len(rewards)`` turns; each turn has one action token then observation
    tokens, all token ids distinct and every action's logprob -1 (as the engine reported)."""
    turns = [Turn(action=f"a{t}", observation=f"o{t}", reward=r) for t, r in enumerate(rewards)]
    if turns:
        turns[-1].terminated = True
    turn_index = [-1] * prompt_tokens
    loss_mask = [0] * prompt_tokens
    for t in range(len(turns)):
        turn_index += [t] * tokens_per_turn
        loss_mask += [1] + [0] * (tokens_per_turn - 1)
    n = len(turn_index)
    return with_tokens(
        Episode(
            env_id="test:Hand-v0",
            seed=0,
            task="task",
            turns=turns,
            success=success,
            group_id=group_id,
            loss_mask=loss_mask,
            turn_index=turn_index,
        ),
        list(range(1, n + 1)),
        [-1.0 if m else 0.0 for m in loss_mask],
    )


def with_tokens(episode: Episode, token_ids: list[int], logprobs: list[float]) -> Episode:
    """``episode`` with new token ids and logprobs, its turns recording the action tokens
    (``loss_mask`` 1) and their logprobs as an engine would."""
    turns = [
        dataclasses.replace(
            turn,
            token_ids=[token_ids[i] for i in _action_positions(episode, t)],
            logprobs=[logprobs[i] for i in _action_positions(episode, t)],
        )
        for t, turn in enumerate(episode.turns)
    ]
    return dataclasses.replace(episode, turns=turns, token_ids=token_ids, logprobs=logprobs)


def _action_positions(episode: Episode, turn: int) -> list[int]:
    return [
        i
        for i, (t, m) in enumerate(zip(episode.turn_index, episode.loss_mask, strict=True))
        if t == turn and m
    ]
