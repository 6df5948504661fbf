"""Episodes to padded training tensors (``docs/trainers.md``).

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

    ``loss_mask`` (float) is 1 on the tokens the loss sees; ``old_logprobs`` are the logprobs
    of the policy that sampled each token (the rollout, or behaviour, policy) and
    ``has_old_logprobs`` (bool) marks the tokens whose logprob the rollout engine reported.
    Tokens the loss sees without one (env tokens trained on, actions of an engine that gives
    no logprobs) get theirs from the learner before the update (:meth:`with_old_logprobs`).
    ``prox_logprobs`` are the proximal policy's (decoupled PPO); they equal ``old_logprobs``
    until :meth:`with_prox_logprobs` sets them.
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    has_old_logprobs: Tensor
    prox_logprobs: Tensor

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

    @property
    def length(self) -> int:
        """Tokens per row (the padded length)."""
        return int(self.input_ids.shape[1])

    def row_chunks(self, size: int) -> list[range]:
        """The rows of consecutive chunks of ``size`` sequences."""
        if size <= 0:
            raise ValueError(f"micro-batch size must be positive, got {size}")
        return [range(start, min(start + size, len(self))) for start in range(0, len(self), size)]

    def micro_batches(self, size: int) -> Iterator[TrainBatch]:
        """Consecutive chunks of ``size`` sequences, each trimmed to its own longest sequence."""
        for rows in self.row_chunks(size):
            yield self.select(rows)

    def to(self, device: torch.device | str) -> TrainBatch:
        """The batch on ``device``."""
        return TrainBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    @property
    def complete(self) -> bool:
        """Whether every token the loss sees has an old logprob."""
        return not bool(((self.loss_mask > 0) & ~self.has_old_logprobs).any())

    def with_old_logprobs(self, old_logprobs: Tensor) -> TrainBatch:
        """A copy whose missing old logprobs are filled from ``old_logprobs`` (same shape);
        the proximal logprobs follow them."""
        filled = torch.where(self.has_old_logprobs, self.old_logprobs, old_logprobs)
        return replace(
            self,
            old_logprobs=filled,
            has_old_logprobs=torch.ones_like(filled).bool(),
            prox_logprobs=filled,
        )

    def with_prox_logprobs(self, prox_logprobs: Tensor) -> TrainBatch:
        """A copy with the proximal policy's logprobs (same shape)."""
        return replace(self, prox_logprobs=prox_logprobs)


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
    tool-integrated reasoning. Rollout logprobs count as given only on the action tokens of
    turns whose ``Turn.logprobs`` cover every one of their ``Turn.token_ids``
    (:func:`engine_logprob_mask`); a logprob the runner recorded as a placeholder is never
    taken for the policy's.
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
        has_old_logprobs[row, :n] = torch.tensor(engine_logprob_mask(episode)) & policy
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
        prox_logprobs=old_logprobs,
    )


def engine_logprob_mask(episode: Episode) -> list[bool]:
    """Per token of ``episode``, whether its logprob was reported by the rollout engine.

    Turn t's tokens (``turn_index == t``) start with its action; when ``Turn.logprobs`` has
    one value per ``Turn.token_ids``, the first ``len(Turn.token_ids)`` of them are the
    engine's. Prompt and observation tokens, and actions an engine gave no logprobs for (the
    runner records 0.0 there), are False.
    """
    engine = [False] * len(episode.token_ids)
    starts: dict[int, int] = {}
    for position, turn in enumerate(episode.turn_index):
        starts.setdefault(turn, position)
    for t, turn in enumerate(episode.turns):
        if t not in starts or not turn.token_ids or len(turn.logprobs) != len(turn.token_ids):
            continue
        end = min(starts[t] + len(turn.token_ids), len(engine))
        for position in range(starts[t], end):
            engine[position] = episode.turn_index[position] == t
    return engine


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
