"""Hand-built episodes with token-level fields, for trainer tests."""

from __future__ import annotations

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
    tokens, all token ids distinct and every logprob -1."""
    turns = [Turn(action=f"a{t}", observation=f"o{t}", reward=r) for t, r in enumerate(rewards)]
    if turns:
        turns[-1].terminated = True
    turn_index = [-1] * prompt_tokens
    loss_mask = [0] * prompt_tokens
    for t in range(len(turns)):
        turn_index += [t] * tokens_per_turn
        loss_mask += [1] + [0] * (tokens_per_turn - 1)
    n = len(turn_index)
    return Episode(
        env_id="test:Hand-v0",
        seed=0,
        task="task",
        turns=turns,
        success=success,
        group_id=group_id,
        token_ids=list(range(1, n + 1)),
        logprobs=[-1.0 if m else 0.0 for m in loss_mask],
        loss_mask=loss_mask,
        turn_index=turn_index,
    )
