"""Policy losses and aggregation against hand-worked numbers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the trainer losses need torch (extra 'train')")

from palaestra.trainers.config import LossConfig  # noqa: E402
from palaestra.trainers.losses import (  # noqa: E402
    aggregate,
    behaviour_weight,
    clip_cov_loss,
    clip_cov_tokens,
    compute_policy_loss,
    kl_cov_loss,
    kl_cov_tokens,
    kl_loss,
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


def test_dual_clip_bounds_a_negative_advantage_token_with_a_large_ratio() -> None:
    # A = -1 with rho = 50: plain PPO-clip's loss is 50 and its gradient 50; dual-clip with
    # c = 3 caps the loss at 3 and removes the gradient. Positive-advantage and low-ratio
    # tokens are untouched.
    old = torch.full((1, 3), -2.0)
    logp = (old + torch.tensor([[math.log(50.0), math.log(50.0), math.log(2.0)]])).requires_grad_()
    advantages = torch.tensor([[-1.0, 1.0, -1.0]])
    plain, _ = ppo_clip_loss(logp, old, advantages)
    assert float(plain[0, 0].detach()) == approx(50.0)
    loss, inactive = ppo_clip_loss(logp, old, advantages, dual_clip=3.0)
    assert loss.detach().tolist()[0] == approx([3.0, -1.2, 2.0])
    assert inactive.tolist()[0] == [True, True, False]
    loss.sum().backward()
    assert logp.grad.tolist()[0] == approx([0.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        ppo_clip_loss(logp, old, advantages, dual_clip=1.0)


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
    chosen = clip_cov_tokens(
        logp, COV_LOGP, COV_ADV, COV_MASK, clip_ratio=0.5, cov_lb=0.3, cov_ub=1.0
    )
    loss, no_grad = clip_cov_loss(logp, COV_LOGP, COV_ADV, chosen)
    assert loss.detach().tolist()[0] == approx([-1.0, -1.0, 1.0, -2.0])  # values kept: -A
    assert no_grad.tolist()[0] == [True, False, True, False]
    loss.sum().backward()
    assert logp.grad.tolist()[0] == approx([0.0, -1.0, 0.0, -2.0])


def test_clip_cov_draws_the_subset_from_the_generator() -> None:
    # clip_ratio 0.25 of 4 tokens = 1 of the two candidates (tokens 0 and 2)
    picks = set()
    for seed in range(20):
        chosen = clip_cov_tokens(
            COV_LOGP,
            COV_LOGP,
            COV_ADV,
            COV_MASK,
            clip_ratio=0.25,
            cov_lb=0.3,
            cov_ub=1.0,
            generator=torch.Generator().manual_seed(seed),
        )
        indices = chosen[0].nonzero().flatten().tolist()
        assert len(indices) == 1 and indices[0] in (0, 2)
        picks.add(indices[0])
    assert picks == {0, 2}


def test_a_zero_covariance_fraction_touches_no_token() -> None:
    # before, max(1, int(0 * n)) singled out one token even at ratio 0
    no_clip = clip_cov_tokens(COV_LOGP, COV_LOGP, COV_ADV, COV_MASK, clip_ratio=0.0, cov_lb=-9)
    assert not no_clip.any()
    assert not kl_cov_tokens(COV_LOGP, COV_ADV, COV_MASK, ratio=0.0).any()
    # so with ratio 0 the losses' gradients are those of PPO-clip and the plain policy gradient
    old = COV_LOGP - 0.1
    for policy_loss, same_as in (("clip_cov", "ppo_clip"), ("kl_cov", "pg")):
        gradients = []
        for name in (policy_loss, same_as):
            logp = COV_LOGP.clone().requires_grad_(True)
            config = LossConfig(policy_loss=name, cov_ratio=0.0, clip_cov_lb=-9.0)
            compute_policy_loss(config, logp, old, COV_ADV, COV_MASK).loss.backward()
            gradients.append(logp.grad)
        torch.testing.assert_close(gradients[0], gradients[1])


def test_kl_cov_penalizes_the_top_covariance_token() -> None:
    old = COV_LOGP - 0.1  # rho = e^0.1 = 1.105171
    logp = COV_LOGP.clone().requires_grad_(True)
    penalized = kl_cov_tokens(logp, COV_ADV, COV_MASK, ratio=0.25)
    loss = kl_cov_loss(logp, old, COV_ADV, penalized, coef=2.0)
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
    config = LossConfig(policy_loss="pg", kl_coef=0.5, kl_estimator="k2", entropy_coef=0.1)
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
    # policy: mean(-1, +1) = 0; KL: 0.5 * k2 = 0.5 * ln(2)^2 / 2 = 0.120113;
    # entropy: -0.1 * mean(0.7, 0.5) = -0.06
    assert float(result.loss) == approx(0.060113, rel=1e-4)
    # the logged KL is k3's unbiased value: r - 1 - log r = 0.5 - 1 + ln 2
    assert result.metrics["kl_ref"] == approx(LN2 - 0.5)
    assert result.metrics["entropy"] == approx(0.6)
    assert result.metrics["clip_fraction"] == 0.0
    assert result.num_tokens == 2


def _categorical_kl_gradients(estimator: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact expectation over a ~ pi of the gradient of kl_loss, and the gradients of
    KL(pi || ref) and KL(ref || pi), all with respect to pi's logits."""
    logits = torch.tensor([0.3, -0.2, 1.1], requires_grad=True)
    ref = torch.tensor([0.5, 0.3, 0.2]).log()
    logp = logits.log_softmax(-1)
    pi = logp.exp().detach()
    expected_loss = (pi * kl_loss(logp, ref, estimator)).sum()  # score weights held fixed
    (sampled,) = torch.autograd.grad(expected_loss, logits)
    logp = logits.log_softmax(-1)
    forward = (logp.exp() * (logp - ref)).sum()
    (grad_forward,) = torch.autograd.grad(forward, logits)
    logp = logits.log_softmax(-1)
    reverse = (ref.exp() * (ref - logp)).sum()
    (grad_reverse,) = torch.autograd.grad(reverse, logits)
    return sampled, grad_forward, grad_reverse


def test_k2_loss_has_the_gradient_of_kl_pi_to_ref_and_k3_of_kl_ref_to_pi() -> None:
    sampled, forward, reverse = _categorical_kl_gradients("k2")
    torch.testing.assert_close(sampled, forward)
    sampled, forward, reverse = _categorical_kl_gradients("k3")
    torch.testing.assert_close(sampled, reverse)
    assert not torch.allclose(forward, reverse, atol=1e-3)


def test_k3_loss_is_capped_and_k1_is_refused() -> None:
    # log r = 15: r - 1 - log r = 3.3e6 unclamped; verl clamps the loss term at 10
    logp, ref = torch.tensor([-15.0]), torch.tensor([0.0])
    assert float(kl_penalty(logp, ref, "k3")) > 3e6
    assert float(kl_loss(logp, ref, "k3")) == 10.0
    with pytest.raises(ValueError, match="k1 as a loss adds gradient noise"):
        kl_loss(logp, ref, "k1")
    with pytest.raises(ValueError, match="k1 as a loss"):
        LossConfig(kl_coef=0.1, kl_estimator="k1")


def test_approx_kl_rollout_is_unbiased_for_kl_rollout_to_policy() -> None:
    # the rollout policy pi_old = [0.7, 0.3] sampled 7 a's and 3 b's; the policy is now
    # [0.4, 0.6]. KL(pi_old || pi) = 0.7 ln(7/4) + 0.3 ln(1/2) = 0.183782; the old metric
    # (k3 with r = pi_old / pi) averaged 0.191 here
    old = torch.tensor([[math.log(0.7)] * 7 + [math.log(0.3)] * 3])
    new = torch.tensor([[math.log(0.4)] * 7 + [math.log(0.6)] * 3])
    result = compute_policy_loss(LossConfig(), new, old, torch.zeros(1, 10), torch.ones(1, 10))
    true_kl = 0.7 * math.log(7 / 4) + 0.3 * math.log(0.5)
    assert result.metrics["approx_kl_rollout"] == approx(true_kl, rel=1e-5)


@pytest.mark.parametrize("policy_loss", ["pg", "ppo_clip", "clip_cov", "kl_cov"])
def test_nan_on_masked_tokens_reaches_neither_loss_nor_gradient(policy_loss: str) -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    nan_at_masked = torch.where(mask > 0, 0.0, torch.nan)
    old = COV_LOGP - 0.1 + nan_at_masked
    logp = COV_LOGP.clone().requires_grad_(True)
    config = LossConfig(policy_loss=policy_loss, kl_coef=0.1, entropy_coef=0.1, cov_ratio=0.5)
    result = compute_policy_loss(
        config,
        logp,
        old,
        COV_ADV + nan_at_masked,
        mask,
        prox_logp=old,
        ref_logp=COV_LOGP + nan_at_masked,
        entropy=torch.ones(1, 4) + nan_at_masked,
    )
    result.loss.backward()
    assert math.isfinite(float(result.loss.detach()))
    assert all(math.isfinite(v) for v in result.metrics.values())
    assert bool(torch.isfinite(logp.grad).all()) and float(logp.grad[0, 2]) == 0.0


def test_behaviour_weight_is_capped_by_dropping_the_token() -> None:
    behav = torch.log(torch.tensor([[0.5, 0.1, 0.05, 0.2]]))
    prox = torch.log(torch.tensor([[0.5, 0.3, 0.5, 0.2]]))
    # w = prox / behav = 1, 3, 10, 1; the cap 5 drops the third token; the masked fourth is 0
    weight = behaviour_weight(prox, behav, torch.tensor([[1, 1, 1, 0]]), cap=5.0)
    assert weight.tolist()[0] == approx([1.0, 3.0, 0.0, 0.0], rel=1e-5)


def test_decoupled_ppo_clips_against_the_proximal_policy_and_weights_the_behaviour() -> None:
    # Three stale tokens: the learner (= proximal policy at the start of the update) already
    # made them likelier (w = pi_prox / pi_behav = 3) or less likely (w = 0.5) than the policy
    # that sampled them, and one moved 50x (beyond the cap).
    behav = torch.log(torch.tensor([[0.1, 0.4, 0.01]]))
    prox = torch.log(torch.tensor([[0.3, 0.2, 0.5]]))
    advantages = torch.tensor([[1.0, -1.0, -1.0]])
    logp = prox.clone().requires_grad_(True)
    config = LossConfig(policy_loss="ppo_clip", behav_weight_cap=5.0)
    result = compute_policy_loss(config, logp, behav, advantages, torch.ones(1, 3), prox_logp=prox)
    result.loss.backward()
    # published gradient (AReaL): -A * w * rho / N with rho = pi / pi_prox = 1 here; the token
    # beyond the cap gets none. Clipping against the stale rollout policy instead gave token 0
    # no gradient (rho 3 > 1.2) and token 2 a gradient of 50 / 3.
    assert logp.grad.tolist()[0] == approx([-3.0 / 3, 0.5 / 3, 0.0], rel=1e-5)
    assert result.metrics["clip_fraction"] == 0.0
    assert result.metrics["behav_dropped"] == approx(1 / 3)
    assert result.metrics["behav_weight"] == approx((3.0 + 0.5) / 3, rel=1e-5)


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
