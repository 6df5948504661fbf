"""Episodes to padded training tensors (``DESIGN.md`` §3, §6).

Every tensor is ``(batch, length)`` and aligned with ``input_ids``: position t describes token
t (its rollout logprob, whether it is trained on, its advantage). A causal LM predicts token t
from positions < t, so the first token of a sequence is never trained on. Sequences are
right-padded with ``pad_token_id``.

Per-token advantages are broadcast from per-turn advantages: a token of turn t (``turn_index``
t) gets ``A_t``; prompt tokens (``turn_index`` -1) get 0.

>>> batch = build_batch(episodes, advantages)                      # doctest: +SKIP
>>> for micro in batch.micro_batches(4): ...                       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from palaestra.core.types import Episode


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """Padded token-level tensors of a batch of episodes.

    ``loss_mask`` (float) is 1 on the tokens the loss sees; ``has_old_logprobs`` (bool) marks
    tokens whose ``old_logprobs`` came from the rollout engine (policy tokens). When env tokens
    are trained on, their old logprobs must be recomputed before the update.
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    has_old_logprobs: Tensor

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_loss_tokens(self) -> int:
        """Tokens the loss sees, over the whole batch."""
        return int(self.loss_mask.sum())

    @property
    def num_loss_sequences(self) -> int:
        """Sequences with at least one token the loss sees."""
        return int((self.loss_mask.sum(dim=-1) > 0).sum())

    def select(self, rows: Sequence[int] | Tensor) -> TrainBatch:
        """The batch restricted to ``rows``, trimmed to the longest selected sequence."""
        index = torch.as_tensor(rows, dtype=torch.long)
        length = max(int(self.attention_mask[index].sum(dim=-1).max()), 1) if len(index) else 1
        return TrainBatch(**{f.name: getattr(self, f.name)[index, :length] for f in fields(self)})

    def micro_batches(self, size: int) -> Iterator[TrainBatch]:
        """Consecutive chunks of ``size`` sequences, each trimmed to its own longest sequence."""
        if size <= 0:
            raise ValueError(f"micro-batch size must be positive, got {size}")
        for start in range(0, len(self), size):
            yield self.select(range(start, min(start + size, len(self))))

    def to(self, device: torch.device | str) -> TrainBatch:
        """The batch on ``device``."""
        return TrainBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def with_old_logprobs(self, old_logprobs: Tensor) -> TrainBatch:
        """A copy whose missing old logprobs are filled from ``old_logprobs`` (same shape)."""
        filled = torch.where(self.has_old_logprobs, self.old_logprobs, old_logprobs)
        return replace(self, old_logprobs=filled, has_old_logprobs=torch.ones_like(filled).bool())


def build_batch(
    episodes: Sequence[Episode],
    advantages: Sequence[Sequence[float]],
    *,
    pad_token_id: int = 0,
    train_on_env_tokens: bool = False,
) -> TrainBatch:
    """Pad ``episodes`` into a :class:`TrainBatch`, broadcasting per-turn ``advantages``.

    With ``train_on_env_tokens=False`` (the default) the loss sees exactly the tokens whose
    ``Episode.loss_mask`` is 1 (the policy's own tokens). With ``True`` it also sees every
    env/tool token after the prompt (``turn_index >= 0``), as in the unmasked ablations of
    tool-integrated reasoning.
    """
    if not episodes:
        raise ValueError("cannot build a training batch from zero episodes")
    if len(advantages) != len(episodes):
        raise ValueError(
            f"got advantages for {len(advantages)} episodes but {len(episodes)} episodes"
        )
    for index, (episode, episode_advantages) in enumerate(zip(episodes, advantages, strict=True)):
        _check_episode(index, episode, episode_advantages)

    length = max(max(len(episode.token_ids) for episode in episodes), 1)
    shape = (len(episodes), length)
    input_ids = torch.full(shape, pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    loss_mask = torch.zeros(shape, dtype=torch.float32)
    old_logprobs = torch.zeros(shape, dtype=torch.float32)
    token_advantages = torch.zeros(shape, dtype=torch.float32)
    has_old_logprobs = torch.zeros(shape, dtype=torch.bool)

    for row, (episode, episode_advantages) in enumerate(zip(episodes, advantages, strict=True)):
        n = len(episode.token_ids)
        turn_index = torch.tensor(episode.turn_index, dtype=torch.long)
        policy = torch.tensor(episode.loss_mask, dtype=torch.bool)
        per_turn = torch.tensor([0.0, *episode_advantages], dtype=torch.float32)
        input_ids[row, :n] = torch.tensor(episode.token_ids, dtype=torch.long)
        attention_mask[row, :n] = 1
        old_logprobs[row, :n] = torch.tensor(episode.logprobs, dtype=torch.float32)
        token_advantages[row, :n] = per_turn[turn_index + 1]  # turn -1 (prompt) -> 0
        has_old_logprobs[row, :n] = policy
        trained = policy | (turn_index >= 0) if train_on_env_tokens else policy
        loss_mask[row, :n] = trained.float()
    loss_mask[:, 0] = 0.0  # nothing predicts the first token
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=token_advantages,
        has_old_logprobs=has_old_logprobs,
    )


def _check_episode(index: int, episode: Episode, episode_advantages: Sequence[float]) -> None:
    where = f"episode {index} ({episode.env_id}, seed {episode.seed})"
    if episode.error is not None:
        raise ValueError(
            f"{where} errored ({episode.error}); drop errored episodes before building a batch"
        )
    n = len(episode.token_ids)
    if n == 0:
        raise ValueError(
            f"{where} has no token_ids; collect rollouts with an engine that returns tokens"
        )
    lengths = {
        "logprobs": len(episode.logprobs),
        "loss_mask": len(episode.loss_mask),
        "turn_index": len(episode.turn_index),
    }
    mismatched = {name: size for name, size in lengths.items() if size != n}
    if mismatched:
        raise ValueError(
            f"{where}: token fields must all have len(token_ids) = {n}, got {mismatched}"
        )
    if len(episode_advantages) != episode.num_turns:
        raise ValueError(
            f"{where} has {episode.num_turns} turns but {len(episode_advantages)} advantages"
        )
    if episode.turn_index and (
        max(episode.turn_index) >= episode.num_turns or min(episode.turn_index) < -1
    ):
        raise ValueError(
            f"{where}: turn_index values must lie in [-1, {episode.num_turns - 1}], got "
            f"[{min(episode.turn_index)}, {max(episode.turn_index)}]"
        )
