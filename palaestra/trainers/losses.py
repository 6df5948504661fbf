"""Token-level policy losses and loss aggregation (``DESIGN.md`` §6).

All tensors are ``(batch, tokens)``: ``logp`` are the log-probabilities of the sampled tokens
under the policy being trained (with gradient), ``old_logp`` under the policy that produced the
rollout, ``advantages`` the per-token advantages and ``mask`` is 1 on the tokens that count.
The log-ratio is ``log rho = logp - old_logp`` and ``rho = exp(log rho)``.

Per-token losses (to be minimized):

- policy gradient: ``l = -A * rho`` (its gradient is ``-A * rho * grad logp``, the
  importance-weighted REINFORCE gradient; ``rho = 1`` on-policy);
- PPO-clip: ``l = max(-A * rho, -A * clip(rho, 1 - eps_low, 1 + eps_high))``;
- Clip-Cov: PPO-clip, then the gradient of a random ``clip_ratio`` fraction of the tokens whose
  covariance ``(logp - mean logp)(A - mean A)`` lies in ``[cov_lb, cov_ub]`` is detached;
- KL-Cov: ``l = -A * rho``, plus ``coef * |logp - old_logp|`` on the top ``ratio`` fraction
  of tokens by covariance;
- KL to a reference policy, added as ``kl_coef * k`` with ``log r = ref_logp - logp``;
- entropy bonus, added as ``-entropy_coef * H``.
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
    mask = mask.to(values.dtype)
    masked = values * mask
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
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


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
) -> tuple[Tensor, Tensor]:
    """Per-token PPO-clip loss and a bool tensor of the tokens the clip made inactive.

    ``l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))``; ``eps_high > eps_low`` is
    DAPO's clip-higher. A token counts as clipped when the clipped term is strictly the larger,
    i.e. ``A > 0, rho > 1 + eps_high`` or ``A < 0, rho < 1 - eps_low`` (its gradient is zero).
    """
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(
            f"PPO clip needs 0 <= eps_low < 1 and eps_high >= 0, got ({eps_low}, {eps_high})"
        )
    ratio = _ratio(logp, old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """Per-token ``(logp - mean logp)(A - mean A)``, means over masked tokens; detached."""
    logp, advantages = logp.detach(), advantages.detach()
    return (logp - masked_mean(logp, mask)) * (advantages - masked_mean(advantages, mask))


def clip_cov_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    clip_ratio: float = 2e-4,
    cov_lb: float = 1.0,
    cov_ub: float = 5.0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Clip-Cov: PPO-clip with the gradient of a few high-covariance tokens detached.

    Candidates are masked tokens not already clipped by PPO with covariance in
    ``[cov_lb, cov_ub]``; ``max(1, int(clip_ratio * n_masked))`` of them, drawn at random with
    ``generator``, keep their loss value but lose their gradient. Returns the per-token loss and
    the bool tensor of tokens without gradient (PPO-clipped or detached).
    """
    loss, ppo_clipped = ppo_clip_loss(
        logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high
    )
    cov = token_covariance(logp, advantages, mask)
    candidates = (mask > 0) & ~ppo_clipped & (cov >= cov_lb) & (cov <= cov_ub)
    chosen = _random_subset(candidates, _fraction_count(clip_ratio, mask), generator)
    return torch.where(chosen, loss.detach(), loss), ppo_clipped | chosen


def kl_cov_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    ratio: float = 2e-4,
    coef: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """KL-Cov: ``-A rho`` plus ``coef * |logp - old_logp|`` on the highest-covariance tokens.

    The top ``max(1, int(ratio * n_masked))`` masked tokens by covariance are penalized.
    Returns the per-token loss and the bool tensor of penalized tokens.
    """
    cov = token_covariance(logp, advantages, mask).masked_fill(mask <= 0, -torch.inf)
    count = min(_fraction_count(ratio, mask), int((mask > 0).sum()))
    penalized = torch.zeros_like(mask, dtype=torch.bool)
    if count > 0:
        penalized.view(-1)[cov.reshape(-1).topk(count).indices] = True
    penalty = coef * (logp - old_logp).abs()
    loss = policy_gradient_loss(logp, old_logp, advantages)
    return torch.where(penalized, loss + penalty, loss), penalized


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` from tokens sampled by pi.

    With ``log r = ref_logp - logp`` (Schulman's estimators):
    ``k1 = -log r`` (unbiased, can be negative), ``k2 = (log r)^2 / 2``,
    ``k3 = r - 1 - log r`` (unbiased and >= 0). ``log r`` is clamped to +-20 inside k3.
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
    ref_logp: Tensor | None = None,
    entropy: Tensor | None = None,
    num_tokens: float | None = None,
    num_sequences: float | None = None,
    generator: torch.Generator | None = None,
) -> PolicyLoss:
    """The full policy loss of ``config``: policy term + KL to the reference - entropy bonus.

    ``ref_logp`` is required when ``config.kl_coef > 0`` and ``entropy`` (per-token, e.g. from
    :func:`token_entropy`) when ``config.entropy_coef > 0``. ``num_tokens``/``num_sequences``
    are the whole batch's counts when this is one micro-batch (see :func:`aggregate`).
    """
    no_grad_tokens: Tensor
    if config.policy_loss == "pg":
        token_loss = policy_gradient_loss(logp, old_logp, advantages)
        no_grad_tokens = torch.zeros_like(mask, dtype=torch.bool)
    elif config.policy_loss == "ppo_clip":
        token_loss, no_grad_tokens = ppo_clip_loss(
            logp, old_logp, advantages, eps_low=config.eps_low, eps_high=config.eps_high
        )
    elif config.policy_loss == "clip_cov":
        token_loss, no_grad_tokens = clip_cov_loss(
            logp,
            old_logp,
            advantages,
            mask,
            eps_low=config.eps_low,
            eps_high=config.eps_high,
            clip_ratio=config.cov_ratio,
            cov_lb=config.clip_cov_lb,
            cov_ub=config.clip_cov_ub,
            generator=generator,
        )
    elif config.policy_loss == "kl_cov":
        token_loss, no_grad_tokens = kl_cov_loss(
            logp, old_logp, advantages, mask, ratio=config.cov_ratio, coef=config.kl_cov_coef
        )
    else:  # the config validates the name; this guards direct construction
        raise ValueError(f"unknown policy loss {config.policy_loss!r}")

    metrics: dict[str, float] = {}
    if config.kl_coef > 0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs ref_logp: the reference model's token logprobs")
        kl = kl_penalty(logp, ref_logp, config.kl_estimator)
        token_loss = token_loss + config.kl_coef * kl
        metrics["kl_ref"] = float(masked_mean(kl.detach(), mask))
    if config.entropy_coef > 0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs the per-token entropy of the policy")
        token_loss = token_loss - config.entropy_coef * entropy

    loss = aggregate(
        token_loss,
        mask,
        config.aggregation,
        num_tokens=num_tokens,
        num_sequences=num_sequences,
    )
    with torch.no_grad():
        log_ratio = (logp - old_logp).detach()
        metrics["clip_fraction"] = float(masked_mean(no_grad_tokens.float(), mask))
        metrics["ratio_mean"] = float(masked_mean(log_ratio.exp(), mask))
        metrics["approx_kl_rollout"] = float(masked_mean(kl_penalty(logp, old_logp, "k3"), mask))
        if entropy is not None:
            metrics["entropy"] = float(masked_mean(entropy.detach(), mask))
    return PolicyLoss(loss=loss, metrics=metrics, num_tokens=int((mask > 0).sum()))


def _ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    return (logp - old_logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO).exp()


def _fraction_count(fraction: float, mask: Tensor) -> int:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"covariance token fraction must lie in [0, 1], got {fraction}")
    return max(1, int(fraction * int((mask > 0).sum())))


def _random_subset(candidates: Tensor, count: int, generator: torch.Generator | None) -> Tensor:
    flat = candidates.reshape(-1).nonzero().squeeze(-1)
    chosen = torch.zeros_like(candidates, dtype=torch.bool)
    if flat.numel() == 0:
        return chosen
    order = torch.randperm(flat.numel(), generator=generator, device="cpu").to(flat.device)
    chosen.view(-1)[flat[order[:count]]] = True
    return chosen
