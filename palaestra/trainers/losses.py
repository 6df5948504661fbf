"""Token-level policy losses and loss aggregation (``docs/trainers.md``).

All tensors are ``(batch, tokens)``: ``logp`` are the log-probabilities of the sampled tokens
under the policy being trained (with gradient), ``old_logp`` under the policy the loss measures
its ratio against, ``advantages`` the per-token advantages and ``mask`` is 1 on the tokens that
count. The log-ratio is ``log rho = logp - old_logp`` and ``rho = exp(log rho)``.

Per-token losses (to be minimized):

- policy gradient: ``l = -A * rho`` (its gradient is ``-A * rho * grad logp``, the
  importance-weighted REINFORCE gradient; ``rho = 1`` on-policy);
- PPO-clip: ``l = max(-A * rho, -A * clip(rho, 1 - eps_low, 1 + eps_high))``;
- Clip-Cov: PPO-clip, then the gradient of a random ``clip_ratio`` fraction of the tokens whose
  covariance ``(logp - mean logp)(A - mean A)`` lies in ``[cov_lb, cov_ub]`` is detached;
- KL-Cov: ``l = -A * rho``, plus ``coef * |logp - old_logp|`` on the top ``ratio`` fraction
  of tokens by covariance;
- KL to a reference policy, added as ``kl_coef * k`` (:func:`kl_loss`);
- entropy bonus, added as ``-entropy_coef * H``.

Clip-Cov and KL-Cov pick their tokens by statistics of the whole batch: the update computes the
selection once per optimizer step, before its micro-batches (:func:`covariance_tokens`), so the
gradient does not depend on the micro-batch size.

**Decoupled PPO** (AReaL, for stale rollouts): with ``prox_logp`` given, the ratio is taken
against the proximal policy (``old_logp := prox_logp``, the learner's policy at the start of
the update) and every token's loss is multiplied by the behaviour importance weight
``w = pi_prox / pi_behav`` (no gradient), where ``pi_behav`` is the policy that sampled the
token. Tokens with ``w > behav_weight_cap`` are left out (weight 0), as in AReaL.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from palaestra.trainers.config import LossConfig

AGGREGATIONS = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
"""Loss aggregation modes accepted by :func:`aggregate`."""

KL_ESTIMATORS = ("k1", "k2", "k3")

_MAX_LOG_RATIO = 20.0
_MAX_K3 = 10.0


def aggregate(
    values: Tensor,
    mask: Tensor,
    mode: str = "token-mean",
    *,
    num_tokens: float | None = None,
    num_sequences: float | None = None,
) -> Tensor:
    """Reduce per-token ``values`` to a scalar over the tokens where ``mask`` is 1.

    - ``token-mean``: ``sum_{i,t} m v / sum_{i,t} m`` (every token weighs the same);
    - ``seq-mean-token-sum``: ``(1/N) sum_i sum_t m v`` (no length normalization, Dr. GRPO);
    - ``seq-mean-token-mean``: ``(1/N) sum_i (sum_t m v / sum_t m)`` (every sequence weighs the
      same, the original GRPO);

    where N counts the sequences with at least one masked token. Pass the whole batch's
    ``num_tokens`` / ``num_sequences`` when ``values`` is one micro-batch of it, so that the sum
    of the micro-batch results equals the result on the whole batch.

    >>> aggregate(torch.tensor([[1.0, 3.0], [5.0, 0.0]]), torch.tensor([[1, 1], [1, 0]]))
    tensor(3.)
    """
    masked = torch.where(mask > 0, values, 0.0)
    mask = mask.to(values.dtype)
    tokens_per_seq = mask.sum(dim=-1)
    if mode == "token-mean":
        denominator = tokens_per_seq.sum() if num_tokens is None else num_tokens
        return masked.sum() / max(float(denominator), 1.0)
    sequences = (tokens_per_seq > 0).sum() if num_sequences is None else num_sequences
    if mode == "seq-mean-token-sum":
        per_seq = masked.sum(dim=-1)
    elif mode == "seq-mean-token-mean":
        per_seq = masked.sum(dim=-1) / tokens_per_seq.clamp(min=1.0)
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {list(AGGREGATIONS)}")
    return per_seq.sum() / max(float(sequences), 1.0)


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over the positions where ``mask`` is 1 (0 when the mask is empty)."""
    return torch.where(mask > 0, values, 0.0).sum() / (mask > 0).sum().clamp(min=1)


def policy_gradient_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor) -> Tensor:
    """Per-token ``-A * rho`` with ``rho = exp(logp - old_logp)``."""
    return -advantages * _ratio(logp, old_logp)


def ppo_clip_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-token PPO-clip loss and a bool tensor of the tokens the clip made inactive.

    ``l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))``; ``eps_high > eps_low`` is
    DAPO's clip-higher. A token counts as clipped when the clipped term is strictly the larger,
    i.e. ``A > 0, rho > 1 + eps_high`` or ``A < 0, rho < 1 - eps_low`` (its gradient is zero).
    With ``dual_clip = c > 1`` (dual-clip PPO, Ye et al. 2020; verl's ``clip_ratio_c``) a token
    with ``A < 0`` also loses its gradient once ``rho > c``: ``l = min(l, -A c)``.
    """
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(
            f"PPO clip needs 0 <= eps_low < 1 and eps_high >= 0, got ({eps_low}, {eps_high})"
        )
    ratio = _ratio(logp, old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    loss, inactive = torch.maximum(unclipped, clipped), clipped > unclipped
    if dual_clip is None:
        return loss, inactive
    if dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    capped = (advantages < 0) & (loss > -advantages * dual_clip)
    return torch.where(capped, (-advantages * dual_clip).expand_as(loss), loss), inactive | capped


def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """Per-token ``(logp - mean logp)(A - mean A)``, means over masked tokens; detached."""
    logp, advantages = logp.detach(), advantages.detach()
    return (logp - masked_mean(logp, mask)) * (advantages - masked_mean(advantages, mask))


def clip_cov_tokens(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
    clip_ratio: float = 2e-4,
    cov_lb: float = 1.0,
    cov_ub: float = 5.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The tokens whose gradient Clip-Cov detaches (bool, same shape as ``logp``).

    Candidates are masked tokens not already clipped by PPO with covariance in
    ``[cov_lb, cov_ub]``; ``max(1, int(clip_ratio * n_masked))`` of them (none when
    ``clip_ratio`` is 0) are drawn at random with ``generator``.
    """
    active = mask > 0
    _, ppo_clipped = ppo_clip_loss(
        logp.detach(), old_logp, advantages, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip
    )
    cov = token_covariance(logp, advantages, mask)
    candidates = active & ~ppo_clipped & (cov >= cov_lb) & (cov <= cov_ub)
    return _random_subset(candidates, _fraction_count(clip_ratio, mask), generator)


def kl_cov_tokens(logp: Tensor, advantages: Tensor, mask: Tensor, *, ratio: float = 2e-4) -> Tensor:
    """The tokens KL-Cov penalizes: the top ``max(1, int(ratio * n_masked))`` masked tokens by
    covariance (none when ``ratio`` is 0)."""
    cov = token_covariance(logp, advantages, mask).masked_fill(mask <= 0, -torch.inf)
    count = min(_fraction_count(ratio, mask), int((mask > 0).sum()))
    chosen = torch.zeros_like(mask, dtype=torch.bool)
    if count > 0:
        chosen.view(-1)[cov.reshape(-1).topk(count).indices] = True
    return chosen


def covariance_tokens(
    config: LossConfig,
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    generator: torch.Generator | None = None,
) -> Tensor | None:
    """The tokens ``config``'s Clip-Cov or KL-Cov loss singles out, from statistics over all
    of the given tokens (``None`` for the other losses)."""
    if config.policy_loss == "clip_cov":
        return clip_cov_tokens(
            logp,
            old_logp,
            advantages,
            mask,
            eps_low=config.eps_low,
            eps_high=config.eps_high,
            dual_clip=config.dual_clip,
            clip_ratio=config.cov_ratio,
            cov_lb=config.clip_cov_lb,
            cov_ub=config.clip_cov_ub,
            generator=generator,
        )
    if config.policy_loss == "kl_cov":
        return kl_cov_tokens(logp, advantages, mask, ratio=config.cov_ratio)
    return None


def clip_cov_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    detached: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Clip-Cov: PPO-clip with the gradient of the ``detached`` tokens (from
    :func:`clip_cov_tokens`) removed; they keep their loss value. Returns the per-token loss
    and the bool tensor of tokens without gradient (PPO-clipped or detached)."""
    loss, ppo_clipped = ppo_clip_loss(
        logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip
    )
    return torch.where(detached, loss.detach(), loss), ppo_clipped | detached


def kl_cov_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, penalized: Tensor, *, coef: float = 1.0
) -> Tensor:
    """KL-Cov: ``-A rho`` plus ``coef * |logp - old_logp|`` on the ``penalized`` tokens (from
    :func:`kl_cov_tokens`)."""
    loss = policy_gradient_loss(logp, old_logp, advantages)
    return torch.where(penalized, loss + coef * (logp - old_logp).abs(), loss)


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` from tokens sampled by pi (its value).

    With ``log r = ref_logp - logp`` (Schulman's estimators):
    ``k1 = -log r`` (unbiased, can be negative), ``k2 = (log r)^2 / 2`` (biased, >= 0),
    ``k3 = r - 1 - log r`` (unbiased and >= 0). ``log r`` is clamped to +-20 inside k3.
    As a loss term their gradients differ; see :func:`kl_loss`.
    """
    log_r = ref_logp - logp
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r.square()
    if estimator == "k3":
        log_r = log_r.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        return torch.expm1(log_r) - log_r
    raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {list(KL_ESTIMATORS)}")


def kl_loss(logp: Tensor, ref_logp: Tensor, estimator: str = "k2") -> Tensor:
    """Per-token KL-to-reference loss term, differentiated through ``logp``.

    - ``k2``: gradient ``(logp - ref_logp) grad logp``, whose expectation under pi is the
      gradient of ``KL(pi || pi_ref)``; zero, token by token, where pi equals the reference.
    - ``k3`` (verl, TRL, DeepSeekMath): gradient ``(1 - r) grad logp`` with
      ``r = pi_ref / pi``, whose expectation is the gradient of ``KL(pi_ref || pi)`` (the other
      direction); zero where pi equals the reference. Its value is clamped to
      ``[-10, 10]`` as in verl (without it, ``log r = 15`` gives 3.3e6).
    - ``k1`` is refused: its gradient is ``grad logp`` whatever the reference, pure noise
      with mean zero (its value is still useful as a metric, see :func:`kl_penalty`).
    """
    if estimator == "k2":
        return kl_penalty(logp, ref_logp, "k2")
    if estimator == "k3":
        return kl_penalty(logp, ref_logp, "k3").clamp(-_MAX_K3, _MAX_K3)
    if estimator == "k1":
        raise ValueError(
            "k1 as a loss adds gradient noise even at the reference (its gradient is grad logp); "
            "use k2 (the gradient of KL(pi || ref)) or k3"
        )
    raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {list(KL_ESTIMATORS)}")


def behaviour_weight(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, cap: float) -> Tensor:
    """Decoupled PPO's behaviour importance weight ``pi_prox / pi_behav`` per token, without
    gradient; 0 where it exceeds ``cap`` (AReaL drops such tokens) and on unmasked tokens."""
    weight = (prox_logp - behav_logp).detach().clamp(max=_MAX_LOG_RATIO).exp()
    return torch.where((mask > 0) & (weight <= cap), weight, 0.0)


def token_entropy(logits: Tensor) -> Tensor:
    """Entropy of the softmax over the last dimension: ``H = logsumexp(z) - sum softmax(z) z``."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (logits.softmax(dim=-1) * logits).sum(dim=-1)


@dataclass(slots=True)
class PolicyLoss:
    """The scalar loss to backpropagate and the detached metrics of one (micro-)batch.

    Metric values are means over the masked tokens; ``num_tokens`` is how many there were, so
    metrics of several micro-batches combine as token-weighted means.
    """

    loss: Tensor
    metrics: dict[str, float]
    num_tokens: int


def compute_policy_loss(
    config: LossConfig,
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    prox_logp: Tensor | None = None,
    ref_logp: Tensor | None = None,
    entropy: Tensor | None = None,
    cov_tokens: Tensor | None = None,
    num_tokens: float | None = None,
    num_sequences: float | None = None,
    generator: torch.Generator | None = None,
) -> PolicyLoss:
    """The full policy loss of ``config``: policy term + KL to the reference - entropy bonus.

    ``old_logp`` are the logprobs of the policy that sampled the tokens (the rollout). With
    ``prox_logp`` the loss is decoupled PPO (see the module docstring): ratios against
    ``prox_logp``, each token weighted by :func:`behaviour_weight` with
    ``config.behav_weight_cap``. ``ref_logp`` is required when ``config.kl_coef > 0`` and
    ``entropy`` (per-token, e.g. from :func:`token_entropy`) when ``config.entropy_coef > 0``.
    ``cov_tokens`` are the tokens Clip-Cov/KL-Cov single out (:func:`covariance_tokens`,
    computed over the whole batch); without them they are chosen from these tokens alone.
    ``num_tokens``/``num_sequences`` are the whole batch's counts when this is one micro-batch
    (see :func:`aggregate`). Values at unmasked positions never reach the loss, its gradient
    or the metrics, whatever they are (NaN included).
    """
    active = mask > 0
    logp = torch.where(active, logp, 0.0)
    behav_logp = torch.where(active, old_logp, 0.0)
    old_logp = behav_logp if prox_logp is None else torch.where(active, prox_logp, 0.0)
    advantages = torch.where(active, advantages, 0.0)
    if cov_tokens is None:
        cov_tokens = covariance_tokens(
            config, logp, old_logp, advantages, mask, generator=generator
        )
    token_loss, no_grad_tokens = _policy_term(config, logp, old_logp, advantages, cov_tokens)

    metrics: dict[str, float] = {}
    if prox_logp is not None:
        weight = behaviour_weight(old_logp, behav_logp, mask, config.behav_weight_cap)
        token_loss = token_loss * weight
        metrics["behav_weight"] = float(masked_mean(weight, mask))
        metrics["behav_dropped"] = float(masked_mean((weight == 0).float(), mask))
    if config.kl_coef > 0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs ref_logp: the reference model's token logprobs")
        ref_logp = torch.where(active, ref_logp, 0.0)
        token_loss = token_loss + config.kl_coef * kl_loss(logp, ref_logp, config.kl_estimator)
        metrics["kl_ref"] = float(masked_mean(kl_penalty(logp.detach(), ref_logp, "k3"), mask))
    if config.entropy_coef > 0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs the per-token entropy of the policy")
        token_loss = token_loss - config.entropy_coef * torch.where(active, entropy, 0.0)

    loss = aggregate(
        token_loss,
        mask,
        config.aggregation,
        num_tokens=num_tokens,
        num_sequences=num_sequences,
    )
    metrics.update(_ratio_metrics(logp.detach(), old_logp, behav_logp, no_grad_tokens, mask))
    if entropy is not None:
        metrics["entropy"] = float(masked_mean(entropy.detach(), mask))
    return PolicyLoss(loss=loss, metrics=metrics, num_tokens=int(active.sum()))


def _ratio_metrics(
    logp: Tensor, old_logp: Tensor, behav_logp: Tensor, no_grad_tokens: Tensor, mask: Tensor
) -> dict[str, float]:
    """Share of tokens without gradient, mean ratio, and KL(pi_rollout || pi) estimated from
    the rollout's own samples as ``mean(rho - 1 - log rho)`` with ``rho = pi / pi_rollout``."""
    return {
        "clip_fraction": float(masked_mean(no_grad_tokens.float(), mask)),
        "ratio_mean": float(masked_mean(_ratio(logp, old_logp), mask)),
        "approx_kl_rollout": float(masked_mean(kl_penalty(behav_logp, logp, "k3"), mask)),
    }


def _policy_term(
    config: LossConfig,
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    cov_tokens: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """The per-token policy loss of ``config.policy_loss`` and its tokens without gradient."""
    if config.policy_loss == "pg":
        loss = policy_gradient_loss(logp, old_logp, advantages)
        return loss, torch.zeros_like(loss, dtype=torch.bool)
    clip = {"eps_low": config.eps_low, "eps_high": config.eps_high, "dual_clip": config.dual_clip}
    if config.policy_loss == "ppo_clip":
        return ppo_clip_loss(logp, old_logp, advantages, **clip)
    if config.policy_loss == "clip_cov":
        assert cov_tokens is not None
        return clip_cov_loss(logp, old_logp, advantages, cov_tokens, **clip)
    if config.policy_loss == "kl_cov":
        assert cov_tokens is not None
        loss = kl_cov_loss(logp, old_logp, advantages, cov_tokens, coef=config.kl_cov_coef)
        return loss, torch.zeros_like(loss, dtype=torch.bool)
    # the config validates the name; this guards direct construction
    raise ValueError(f"unknown policy loss {config.policy_loss!r}")


def _ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    return (logp - old_logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO).exp()


def _fraction_count(fraction: float, mask: Tensor) -> int:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"covariance token fraction must lie in [0, 1], got {fraction}")
    return max(1, int(fraction * int((mask > 0).sum()))) if fraction > 0 else 0


def _random_subset(candidates: Tensor, count: int, generator: torch.Generator | None) -> Tensor:
    flat = candidates.reshape(-1).nonzero().squeeze(-1)
    chosen = torch.zeros_like(candidates, dtype=torch.bool)
    if flat.numel() == 0 or count == 0:
        return chosen
    order = torch.randperm(flat.numel(), generator=generator, device="cpu").to(flat.device)
    chosen.view(-1)[flat[order[:count]]] = True
    return chosen
