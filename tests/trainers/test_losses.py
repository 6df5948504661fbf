"""Policy losses and aggregation against hand-worked numbers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the trainer losses need torch (extra 'train')")

from palaestra.trainers.config import LossConfig  # noqa: E402
from palaestra.trainers.losses import (  # noqa: E402
    aggregate,
    clip_cov_loss,
    compute_policy_loss,
    kl_cov_loss,
    kl_penalty,
    policy_gradient_loss,
    ppo_clip_loss,
    token_covariance,
    token_entropy,
)

approx = pytest.approx
LN2 = math.log(2.0)

VALUES = torch.tensor([[1.0, 3.0, 0.0], [5.0, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_token_mean() -> None:
    # (1 + 3 + 5) / 3 tokens
    assert float(aggregate(VALUES, MASK, "token-mean")) == approx(3.0)


def test_seq_mean_token_sum() -> None:
    # ((1 + 3) + 5) / 2 sequences
    assert float(aggregate(VALUES, MASK, "seq-mean-token-sum")) == approx(4.5)


def test_seq_mean_token_mean() -> None:
    # ((1 + 3)/2 + 5/1) / 2 sequences
    assert float(aggregate(VALUES, MASK, "seq-mean-token-mean")) == approx(3.5)


def test_masked_values_do_not_count() -> None:
    poisoned = VALUES.clone()
    poisoned[MASK == 0] = 1e6
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        assert float(aggregate(poisoned, MASK, mode)) == float(aggregate(VALUES, MASK, mode))


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_micro_batches_with_global_counts_sum_to_the_full_batch(mode: str) -> None:
    full = aggregate(VALUES, MASK, mode)
    # 3 masked tokens and 2 sequences in the whole batch
    parts = [
        aggregate(VALUES[i : i + 1], MASK[i : i + 1], mode, num_tokens=3, num_sequences=2)
        for i in range(2)
    ]
    assert float(sum(parts)) == approx(float(full))


def test_explicit_token_count() -> None:
    # 9 / 6 instead of 9 / 3
    assert float(aggregate(VALUES, MASK, "token-mean", num_tokens=6)) == approx(1.5)


def test_unknown_aggregation_is_named() -> None:
    with pytest.raises(ValueError, match="unknown loss aggregation 'mean'"):
        aggregate(VALUES, MASK, "mean")


# Four tokens with ratios 1.5, 0.5, 1.1, 0.7 and advantages +1, -1, -1, +1.
RATIOS = torch.tensor([[1.5, 0.5, 1.1, 0.7]])
ADV = torch.tensor([[1.0, -1.0, -1.0, 1.0]])


def _logp_pair() -> tuple[torch.Tensor, torch.Tensor]:
    old = torch.full_like(RATIOS, -2.0)
    logp = (old + RATIOS.log()).requires_grad_(True)
    return logp, old


def test_policy_gradient_loss_and_gradient() -> None:
    logp, old = _logp_pair()
    loss = policy_gradient_loss(logp, old, ADV)
    # -A * rho
    assert loss.detach().tolist()[0] == approx([-1.5, 0.5, 1.1, -0.7])
    loss.sum().backward()
    # d(-A rho)/dlogp = -A rho
    assert logp.grad.tolist()[0] == approx([-1.5, 0.5, 1.1, -0.7])


def test_ppo_clip_by_hand() -> None:
    logp, old = _logp_pair()
    loss, clipped = ppo_clip_loss(logp, old, ADV, eps_low=0.2, eps_high=0.3)
    # token 0: A=+1, rho 1.5 > 1.3: max(-1.5, -1.3) = -1.3 (clipped)
    # token 1: A=-1, rho 0.5 < 0.8: max(0.5, 0.8) = 0.8 (clipped)
    # token 2: A=-1, rho 1.1: max(1.1, 1.1) = 1.1 (not clipped)
    # token 3: A=+1, rho 0.7 < 0.8: max(-0.7, -0.8) = -0.7 (pessimistic term is unclipped)
    assert loss.detach().tolist()[0] == approx([-1.3, 0.8, 1.1, -0.7])
    assert clipped.tolist()[0] == [True, True, False, False]
    loss.sum().backward()
    # clipped tokens get no gradient; the others get -A rho
    assert logp.grad.tolist()[0] == approx([0.0, 0.0, 1.1, -0.7])


def test_clip_higher_lets_positive_tokens_grow_further() -> None:
    logp, old = _logp_pair()
    symmetric, _ = ppo_clip_loss(logp, old, ADV, eps_low=0.2, eps_high=0.2)
    higher, _ = ppo_clip_loss(logp, old, ADV, eps_low=0.2, eps_high=0.6)
    # token 0 (A=+1, rho 1.5): -1.2 with eps_high 0.2, -1.5 (unclipped) with eps_high 0.6
    assert float(symmetric[0, 0].detach()) == approx(-1.2)
    assert float(higher[0, 0].detach()) == approx(-1.5)


def test_ppo_clip_rejects_bad_bounds() -> None:
    logp, old = _logp_pair()
    with pytest.raises(ValueError, match="eps_low < 1"):
        ppo_clip_loss(logp, old, ADV, eps_low=1.0)


# Covariance example: logp -1, -2, -3, -4 (mean -2.5), A 1, 1, -1, 2 (mean 0.75):
# cov = (1.5)(0.25), (0.5)(0.25), (-0.5)(-1.75), (-1.5)(1.25) = 0.375, 0.125, 0.875, -1.875
COV_LOGP = torch.tensor([[-1.0, -2.0, -3.0, -4.0]])
COV_ADV = torch.tensor([[1.0, 1.0, -1.0, 2.0]])
COV_MASK = torch.ones(1, 4)


def test_token_covariance_by_hand() -> None:
    cov = token_covariance(COV_LOGP, COV_ADV, COV_MASK)
    assert cov.tolist()[0] == approx([0.375, 0.125, 0.875, -1.875])


def test_clip_cov_detaches_candidates_in_the_covariance_band() -> None:
    logp = COV_LOGP.clone().requires_grad_(True)
    # rho = 1 everywhere, so PPO clips nothing; the band [0.3, 1.0] holds tokens 0 and 2;
    # clip_ratio 0.5 of 4 tokens = 2 -> both are detached
    loss, no_grad = clip_cov_loss(
        logp, COV_LOGP, COV_ADV, COV_MASK, clip_ratio=0.5, cov_lb=0.3, cov_ub=1.0
    )
    assert loss.detach().tolist()[0] == approx([-1.0, -1.0, 1.0, -2.0])  # values kept: -A
    assert no_grad.tolist()[0] == [True, False, True, False]
    loss.sum().backward()
    assert logp.grad.tolist()[0] == approx([0.0, -1.0, 0.0, -2.0])


def test_clip_cov_draws_the_subset_from_the_generator() -> None:
    # clip_ratio 0.25 of 4 tokens = 1 of the two candidates (tokens 0 and 2)
    picks = set()
    for seed in range(20):
        _, no_grad = clip_cov_loss(
            COV_LOGP,
            COV_LOGP,
            COV_ADV,
            COV_MASK,
            clip_ratio=0.25,
            cov_lb=0.3,
            cov_ub=1.0,
            generator=torch.Generator().manual_seed(seed),
        )
        chosen = no_grad[0].nonzero().flatten().tolist()
        assert len(chosen) == 1 and chosen[0] in (0, 2)
        picks.add(chosen[0])
    assert picks == {0, 2}


def test_kl_cov_penalizes_the_top_covariance_token() -> None:
    old = COV_LOGP - 0.1  # rho = e^0.1 = 1.105171
    logp = COV_LOGP.clone().requires_grad_(True)
    loss, penalized = kl_cov_loss(logp, old, COV_ADV, COV_MASK, ratio=0.25, coef=2.0)
    # 1 token (0.25 * 4) with the largest covariance: token 2 (0.875)
    assert penalized.tolist()[0] == [False, False, True, False]
    # -A rho everywhere; token 2 adds 2.0 * |0.1| = 0.2
    rho = math.exp(0.1)
    assert loss.detach().tolist()[0] == approx([-rho, -rho, rho + 0.2, -2 * rho], rel=1e-5)


def test_kl_estimators_by_hand() -> None:
    # pi = 0.5, pi_ref = 0.25 -> log r = log 0.5 = -0.693147
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    assert float(kl_penalty(logp, ref, "k1")) == approx(LN2)  # -log r
    assert float(kl_penalty(logp, ref, "k2")) == approx(0.5 * LN2**2)  # 0.240227
    assert float(kl_penalty(logp, ref, "k3")) == approx(0.5 - 1 + LN2)  # r - 1 - log r = 0.193147
    for estimator in ("k1", "k2", "k3"):
        assert float(kl_penalty(logp, logp, estimator)) == approx(0.0)


def test_k3_is_unbiased_for_the_true_kl() -> None:
    # pi = [0.7, 0.3], ref = [0.4, 0.6]; KL(pi||ref) = 0.7 ln(7/4) + 0.3 ln(1/2) = 0.183782
    pi, ref = torch.tensor([0.7, 0.3]), torch.tensor([0.4, 0.6])
    for estimator in ("k1", "k3"):
        per_token = kl_penalty(pi.log(), ref.log(), estimator)
        assert float((pi * per_token).sum()) == approx(0.7 * math.log(7 / 4) + 0.3 * math.log(0.5))


def test_unknown_kl_estimator() -> None:
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")


def test_token_entropy_by_hand() -> None:
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])
    # uniform over 2: ln 2; probs [1/4, 3/4]: 0.25 ln 4 + 0.75 ln(4/3) = 0.562335
    assert token_entropy(logits).tolist() == approx(
        [LN2, 0.25 * math.log(4) + 0.75 * math.log(4 / 3)]
    )


def test_full_loss_combines_policy_kl_and_entropy() -> None:
    config = LossConfig(policy_loss="pg", kl_coef=0.5, kl_estimator="k1", entropy_coef=0.1)
    logp = torch.full((1, 2), math.log(0.5))
    result = compute_policy_loss(
        config,
        logp,
        logp,
        torch.tensor([[1.0, -1.0]]),
        torch.ones(1, 2),
        ref_logp=torch.full((1, 2), math.log(0.25)),
        entropy=torch.tensor([[0.7, 0.5]]),
    )
    # policy: mean(-1, +1) = 0; KL: 0.5 * ln 2 = 0.346574; entropy: -0.1 * mean(0.7, 0.5) = -0.06
    assert float(result.loss) == approx(0.286574, rel=1e-5)
    assert result.metrics["kl_ref"] == approx(LN2)
    assert result.metrics["entropy"] == approx(0.6)
    assert result.metrics["clip_fraction"] == 0.0
    assert result.num_tokens == 2


def test_full_loss_reports_clip_fraction() -> None:
    logp, old = _logp_pair()
    result = compute_policy_loss(
        LossConfig(eps_low=0.2, eps_high=0.3), logp, old, ADV, torch.ones(1, 4)
    )
    # tokens 0 and 1 are clipped (see test_ppo_clip_by_hand); loss = mean(-1.3, 0.8, 1.1, -0.7)
    assert result.metrics["clip_fraction"] == approx(0.5)
    assert float(result.loss.detach()) == approx(-0.025)


def test_full_loss_requires_what_its_terms_need() -> None:
    zeros = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="needs ref_logp"):
        compute_policy_loss(LossConfig(kl_coef=0.1), zeros, zeros, zeros, torch.ones(1, 2))
    with pytest.raises(ValueError, match="per-token entropy"):
        compute_policy_loss(LossConfig(entropy_coef=0.1), zeros, zeros, zeros, torch.ones(1, 2))
