"""One policy update of a causal LM on a :class:`~palaestra.trainers.batch.TrainBatch`.

The update recomputes the policy's token logprobs in micro-batches (never holding a whole
micro-batch's float32 logits: :mod:`palaestra.trainers.token_logprobs`), applies the policy loss of
:mod:`palaestra.trainers.losses` normalized by whole-mini-batch counts (so gradient accumulation
gives the same gradient as one big batch), clips the gradient norm and steps AdamW and its
learning-rate schedule. Everything that depends on the whole mini-batch is computed before its
micro-batches: the token counts, and the tokens Clip-Cov/KL-Cov single out (from one forward
pass without gradient), so the gradient does not depend on ``micro_batch_size``.

Before the first optimizer step one forward pass without gradient gives the learner's own
logprobs. They fill the old logprobs the rollout engine did not report, and with decoupled PPO
(``TrainerConfig.decoupled``, on by default in async mode) they are the proximal policy's.

An optimizer step whose loss or gradient norm is not finite is skipped: the gradients are
dropped, the weights, optimizer state and schedule stay as they were, and ``skipped_updates``
counts it.

>>> updater = PolicyUpdater(model, config)                      # doctest: +SKIP
>>> metrics = updater.step(build_batch(episodes, advantages))   # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

import torch
from torch import Tensor, nn

from palaestra.trainers.batch import TrainBatch
from palaestra.trainers.config import OptimConfig, TrainerConfig
from palaestra.trainers.losses import compute_policy_loss, covariance_tokens
from palaestra.trainers.token_logprobs import sequence_logprobs

__all__ = ["PolicyUpdater", "build_optimizer", "lr_factor", "sequence_logprobs"]


def build_optimizer(
    parameters: list[nn.Parameter], config: OptimConfig
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW and its schedule: linear warmup over ``warmup_steps``, then constant, linear decay
    to 0 or cosine decay to 0 at ``total_steps`` (counted in optimizer steps)."""
    optimizer = torch.optim.AdamW(
        parameters,
        lr=config.lr,
        betas=config.betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
    )
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))


def lr_factor(step: int, config: OptimConfig) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based)."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.schedule == "constant" or config.total_steps is None:
        return 1.0
    decay_steps = max(config.total_steps - config.warmup_steps, 1)
    progress = min((step - config.warmup_steps) / decay_steps, 1.0)
    if config.schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


class PolicyUpdater:
    """Owns the optimizer state of a policy and turns batches into optimizer steps.

    Each :meth:`step` runs ``config.update.epochs`` passes over the batch; each pass is split
    into ``config.update.mini_batches`` optimizer steps, each accumulated over micro-batches of
    ``config.update.micro_batch_size`` sequences. ``ref_model`` is needed when
    ``config.loss.kl_coef > 0``.
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainerConfig,
        *,
        ref_model: nn.Module | None = None,
    ) -> None:
        if config.loss.kl_coef > 0 and ref_model is None:
            raise ValueError("loss.kl_coef > 0 needs a ref_model (a frozen copy of the policy)")
        self.model = model
        self.ref_model = ref_model
        self.config = config
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError("the model has no trainable parameters")
        self.optimizer, self.scheduler = build_optimizer(self.parameters, config.optim)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.optimizer_steps = 0
        self.skipped_steps = 0
        """Optimizer steps skipped for a non-finite loss or gradient norm, over the run."""

    @property
    def device(self) -> torch.device:
        return self.parameters[0].device

    def state_dict(self) -> dict:
        """Optimizer, scheduler, sampling-generator state and step count (for checkpoints)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
            "optimizer_steps": self.optimizer_steps,
            "skipped_steps": self.skipped_steps,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        self.optimizer_steps = int(state["optimizer_steps"])
        self.skipped_steps = int(state["skipped_steps"])

    def step(self, batch: TrainBatch) -> dict[str, float]:
        """Update the policy on ``batch``; returns token-weighted metrics of the update.

        Metrics: ``loss``, ``clip_fraction``, ``ratio_mean``, ``approx_kl_rollout``, ``entropy``,
        ``kl_ref`` (with a reference model), ``behav_weight`` and ``behav_dropped`` (decoupled
        PPO), ``grad_norm`` (before clipping), all means over the optimizer steps taken;
        ``skipped_updates`` (optimizer steps skipped for a non-finite loss or gradient),
        ``lr``, ``num_tokens``, ``update_time`` (s) and ``tokens_per_s``.
        """
        started = time.perf_counter()
        if batch.num_loss_tokens == 0:
            raise ValueError(
                "the batch has no tokens to train on (every loss_mask is 0); check that the "
                "episodes carry policy tokens or that filters did not drop everything"
            )
        batch = self.prepare(batch.to(self.device))
        sums: dict[str, float] = defaultdict(float)
        tokens = 0
        losses: list[float] = []
        grad_norms: list[float] = []
        skipped = 0
        for _ in range(self.config.update.epochs):
            order = torch.randperm(len(batch), generator=self.generator)
            for rows in order.tensor_split(min(self.config.update.mini_batches, len(batch))):
                loss, mini_sums, mini_tokens = self.accumulate_gradients(batch.select(rows))
                grad_norm = self._optimizer_step(loss)
                if grad_norm is None:
                    skipped += 1
                    continue
                for key, value in mini_sums.items():
                    sums[key] += value
                tokens += mini_tokens
                losses.append(loss)
                grad_norms.append(grad_norm)
        elapsed = time.perf_counter() - started
        metrics = {key: value / max(tokens, 1) for key, value in sums.items()}
        if losses:
            metrics.update(loss=_mean(losses), grad_norm=_mean(grad_norms))
        metrics.update(
            skipped_updates=float(skipped),
            lr=self.scheduler.get_last_lr()[0],
            num_tokens=float(batch.num_loss_tokens),
            update_time=elapsed,
            tokens_per_s=tokens / elapsed if elapsed > 0 else 0.0,
        )
        return metrics

    def accumulate_gradients(self, mini: TrainBatch) -> tuple[float, dict[str, float], int]:
        """Forward/backward over the micro-batches of ``mini``; gradients add up in ``.grad``.

        The loss is normalized by ``mini``'s own token/sequence counts and Clip-Cov/KL-Cov pick
        their tokens over all of ``mini``, so the accumulated gradient equals that of one pass
        over ``mini`` whatever the micro-batch size. ``mini`` must come from a batch that
        went through :meth:`prepare`. Returns the loss, token-weighted sums of the metrics
        and the number of loss tokens.
        """
        loss_config, update_config = self.config.loss, self.config.update
        num_tokens, num_sequences = mini.num_loss_tokens, mini.num_loss_sequences
        cov_tokens = self._covariance_tokens(mini)
        sums: dict[str, float] = defaultdict(float)
        tokens = 0
        loss = 0.0
        self.model.train()
        for rows in mini.row_chunks(update_config.micro_batch_size):
            micro = mini.select(rows)
            if micro.num_loss_tokens == 0:
                continue
            logp, entropy = sequence_logprobs(
                self.model,
                micro.input_ids,
                micro.attention_mask,
                temperature=update_config.temperature,
                with_entropy=True,
            )
            if loss_config.entropy_coef == 0:
                entropy = entropy.detach()
            result = compute_policy_loss(
                loss_config,
                logp,
                micro.old_logprobs,
                micro.advantages,
                micro.loss_mask,
                prox_logp=micro.prox_logprobs if self.config.decoupled else None,
                ref_logp=self._reference_logprobs(micro),
                entropy=entropy,
                cov_tokens=None if cov_tokens is None else _rows(cov_tokens, rows, micro.length),
                num_tokens=num_tokens,
                num_sequences=num_sequences,
            )
            result.loss.backward()
            loss += float(result.loss.detach())
            for key, value in result.metrics.items():
                sums[key] += value * result.num_tokens
            tokens += result.num_tokens
        return loss, sums, tokens

    def learner_logprobs(self, batch: TrainBatch, model: nn.Module | None = None) -> Tensor:
        """Token logprobs of ``model`` (default: the policy) on ``batch``, without gradient,
        computed in micro-batches and padded to the batch's length."""
        model = self.model if model is None else model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            parts = [
                sequence_logprobs(
                    model,
                    micro.input_ids,
                    micro.attention_mask,
                    temperature=self.config.update.temperature,
                )[0]
                for micro in batch.micro_batches(self.config.update.micro_batch_size)
            ]
        model.train(was_training)
        padded = [nn.functional.pad(part, (0, batch.length - part.shape[1])) for part in parts]
        return torch.cat(padded, dim=0)

    def prepare(self, batch: TrainBatch) -> TrainBatch:
        """``batch`` with the old logprobs the engine did not report filled from the learner,
        and with decoupled PPO the proximal logprobs set to the learner's: both from one
        forward pass at the start of the step (none when neither is needed).
        :meth:`step` calls it."""
        if batch.complete and not self.config.decoupled:
            return batch
        learner = self.learner_logprobs(batch)
        batch = batch.with_old_logprobs(learner)
        return batch.with_prox_logprobs(learner) if self.config.decoupled else batch

    def _covariance_tokens(self, mini: TrainBatch) -> Tensor | None:
        """Clip-Cov/KL-Cov's tokens over the whole mini-batch (``None`` for other losses)."""
        if self.config.loss.policy_loss not in ("clip_cov", "kl_cov"):
            return None
        ratio_base = mini.prox_logprobs if self.config.decoupled else mini.old_logprobs
        return covariance_tokens(
            self.config.loss,
            self.learner_logprobs(mini),
            ratio_base,
            mini.advantages,
            mini.loss_mask,
            generator=self.generator,
        )

    def _optimizer_step(self, loss: float) -> float | None:
        """Clip and apply the accumulated gradient; returns its norm before clipping, or
        ``None`` when the loss or the norm is not finite (the step is then skipped)."""
        max_norm = self.config.optim.max_grad_norm
        norm = float(
            torch.nn.utils.clip_grad_norm_(
                self.parameters, max_norm if max_norm is not None else math.inf
            )
        )
        applied = math.isfinite(loss) and math.isfinite(norm)
        if applied:
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer_steps += 1
        else:
            self.skipped_steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        return norm if applied else None

    def _reference_logprobs(self, micro: TrainBatch) -> Tensor | None:
        if self.ref_model is None or self.config.loss.kl_coef == 0:
            return None
        with torch.no_grad():
            ref_logp, _ = sequence_logprobs(
                self.ref_model,
                micro.input_ids,
                micro.attention_mask,
                temperature=self.config.update.temperature,
            )
        return ref_logp


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _rows(values: Tensor, rows: range, length: int) -> Tensor:
    """``values`` of a mini-batch cut to the micro-batch of ``rows``, ``length`` tokens long."""
    return values[rows.start : rows.stop, :length]
