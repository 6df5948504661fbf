"""The update step on a tiny random-init Qwen2: direction, accumulation, resume, schedule."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest

torch = pytest.importorskip("torch", reason="the update step needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny test model needs transformers")

from palaestra.trainers.batch import build_batch  # noqa: E402
from palaestra.trainers.config import OptimConfig, TrainerConfig  # noqa: E402
from palaestra.trainers.update import (  # noqa: E402
    PolicyUpdater,
    lr_factor,
    sequence_logprobs,
)
from tests.trainers.tiny_model import (  # noqa: E402
    VOCAB_SIZE,
    mean_policy_logp,
    on_policy_episodes,
    tiny_qwen2,
)


def _config(**update) -> TrainerConfig:
    return TrainerConfig(
        optim={"lr": 1e-3, "max_grad_norm": 1.0},
        update={"micro_batch_size": 2, **update},
    )


def test_sequence_logprobs_match_a_manual_log_softmax() -> None:
    model = tiny_qwen2()
    ids = torch.randint(0, VOCAB_SIZE, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logp, entropy = sequence_logprobs(
            model, ids, torch.ones_like(ids), temperature=2.0, with_entropy=True
        )
        log_probs = torch.log_softmax(model(input_ids=ids).logits / 2.0, dim=-1)
    assert float(logp[0, 0]) == 0.0 and float(entropy[0, 0]) == 0.0
    # token t is scored by the distribution at position t-1
    assert float(logp[1, 4]) == pytest.approx(float(log_probs[1, 3, ids[1, 4]]), abs=1e-5)
    expected_entropy = -(log_probs[0, 5].exp() * log_probs[0, 5]).sum()
    assert float(entropy[0, 6]) == pytest.approx(float(expected_entropy), abs=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["advantages", "flipped-advantages"])
def test_updates_move_logprobs_in_the_direction_of_the_advantage(sign: float) -> None:
    model = tiny_qwen2()
    episodes = on_policy_episodes(model, [2, 2, 2, 2])
    # episodes 0 and 1 are good (+1 on every turn), 2 and 3 bad (-1); flipped when sign < 0
    advantages = [[sign] * 2, [sign] * 2, [-sign] * 2, [-sign] * 2]
    batch = build_batch(episodes, advantages)
    good_before = mean_policy_logp(model, batch, [0, 1])
    bad_before = mean_policy_logp(model, batch, [2, 3])
    updater = PolicyUpdater(model, _config())
    history = [updater.step(batch) for _ in range(5)]
    good_change = mean_policy_logp(model, batch, [0, 1]) - good_before
    bad_change = mean_policy_logp(model, batch, [2, 3]) - bad_before
    # with sign +1 the good tokens become likelier and the bad ones less likely; -1 reverses it
    assert sign * good_change > 0.05
    assert sign * bad_change < -0.05
    # on-policy at first (ratio 1, nothing clipped); repeated steps on the same rollout push
    # ratios past 1 +- 0.2 until PPO clips them
    assert history[0]["clip_fraction"] == 0 and history[0]["grad_norm"] > 0
    assert history[-1]["clip_fraction"] > 0.5
    assert all(math.isfinite(m["loss"]) for m in history)


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_gradient_accumulation_matches_one_big_batch(aggregation: str) -> None:
    # episodes of different lengths, so micro-batches are padded differently
    reference = tiny_qwen2()
    batch = build_batch(
        on_policy_episodes(reference, [1, 3, 2, 4]), [[1.0], [-0.5] * 3, [2.0] * 2, [0.3] * 4]
    )
    gradients = []
    for micro_batch_size in (4, 1):
        model = copy.deepcopy(reference)
        config = TrainerConfig(
            loss={"aggregation": aggregation}, update={"micro_batch_size": micro_batch_size}
        )
        PolicyUpdater(model, config).accumulate_gradients(batch)
        gradients.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert float(gradients[0].abs().max()) > 1e-3
    torch.testing.assert_close(gradients[0], gradients[1], atol=1e-6, rtol=1e-4)


def test_env_tokens_get_old_logprobs_from_the_policy() -> None:
    model = tiny_qwen2()
    batch = build_batch(
        on_policy_episodes(model, [2, 2]), [[1.0, 1.0], [-1.0, -1.0]], train_on_env_tokens=True
    )
    # policy tokens carry the model's own logprobs and env tokens are filled from it, so on the
    # first (and only) pass the ratio is 1 everywhere; env tokens left at 0 would give rho << 1
    metrics = PolicyUpdater(model, _config()).step(batch)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["approx_kl_rollout"] == pytest.approx(0.0, abs=1e-6)


def test_kl_to_reference_is_zero_for_an_identical_reference_and_required() -> None:
    model = tiny_qwen2()
    batch = build_batch(on_policy_episodes(model, [2, 2]), [[1.0, 1.0], [-1.0, -1.0]])
    config = TrainerConfig(loss={"kl_coef": 0.1}, optim={"lr": 1e-3})
    with pytest.raises(ValueError, match="needs a ref_model"):
        PolicyUpdater(model, config)
    updater = PolicyUpdater(model, config, ref_model=copy.deepcopy(model).eval())
    assert updater.step(batch)["kl_ref"] == pytest.approx(0.0, abs=1e-6)
    assert updater.step(batch)["kl_ref"] > 0  # the policy has moved away from the reference


def test_resuming_from_state_dicts_continues_exactly() -> None:
    torch.use_deterministic_algorithms(True)
    try:
        model = tiny_qwen2()
        batch = build_batch(on_policy_episodes(model, [2, 1, 2]), [[1.0, 1.0], [-1.0], [0.5, 0.5]])
        config = _config(mini_batches=2)
        uninterrupted = PolicyUpdater(model, config)
        uninterrupted.step(batch)
        saved_model = copy.deepcopy(model.state_dict())
        saved_updater = copy.deepcopy(uninterrupted.state_dict())
        uninterrupted.step(batch)
        uninterrupted.step(batch)

        resumed_model = tiny_qwen2(seed=123)  # different init, overwritten by the checkpoint
        resumed_model.load_state_dict(saved_model)
        resumed = PolicyUpdater(resumed_model, config)
        resumed.load_state_dict(saved_updater)
        resumed.step(batch)
        resumed.step(batch)
        for a, b in zip(model.parameters(), resumed_model.parameters(), strict=True):
            torch.testing.assert_close(a, b, atol=0, rtol=0)
        assert resumed.optimizer_steps == uninterrupted.optimizer_steps == 6
    finally:
        torch.use_deterministic_algorithms(False)


def test_an_all_masked_batch_is_an_error() -> None:
    model = tiny_qwen2()
    batch = build_batch(on_policy_episodes(model, [1]), [[1.0]])
    empty = dataclasses.replace(batch, loss_mask=torch.zeros_like(batch.loss_mask))
    with pytest.raises(ValueError, match="no tokens to train on"):
        PolicyUpdater(model, _config()).step(empty)


def test_learning_rate_schedules_by_hand() -> None:
    linear = OptimConfig(schedule="linear", warmup_steps=2, total_steps=6)
    # warmup (s+1)/2: 0.5, 1; then 1 - (s-2)/4: 1, 0.75, 0.5, 0.25, 0, and 0 beyond
    assert [lr_factor(s, linear) for s in range(8)] == [0.5, 1, 1, 0.75, 0.5, 0.25, 0, 0]
    cosine = OptimConfig(schedule="cosine", warmup_steps=2, total_steps=6)
    # halfway through the decay (step 4): 0.5 (1 + cos(pi/2)) = 0.5
    assert lr_factor(4, cosine) == pytest.approx(0.5)
    assert lr_factor(10, OptimConfig()) == 1.0
