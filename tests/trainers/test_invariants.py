"""Trainer invariants, in one place.

- On-policy, the first update's ratios are 1 (the rollout logprobs are those of the
  distribution sampled, temperature included), and actions without engine logprobs are scored
  by the learner, not given a logprob of 0.
- The update does not depend on ``micro_batch_size``, for every loss (Clip-Cov/KL-Cov
  included), with or without decoupled PPO, KL to a reference and the entropy bonus.
- At the reference, the KL term is 0 and adds no gradient.
- Non-finite rewards, logprobs, losses or gradients never reach the weights.
- Errored episodes never stop a run (RLOO with a group cut down to one episode included).
- Stale tokens get decoupled PPO's gradient (the loss-level numbers are in test_losses.py).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from palaestra.core.types import Episode  # noqa: E402
from palaestra.runner import make_tasks  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.batch import TrainBatch, build_batch  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.trainer import EveryEpisodeErrored, Trainer  # noqa: E402
from palaestra.trainers.update import PolicyUpdater, sequence_logprobs  # noqa: E402
from tests.trainers.factories import with_tokens  # noqa: E402
from tests.trainers.faulty_envs import (  # noqa: E402
    ALWAYS_CRASHING_ID,
    CRASHING_ID,
    NAN_REWARD_ID,
    register_faulty_envs,
)
from tests.trainers.letter_env import ENV_ID, register_once  # noqa: E402
from tests.trainers.tiny_model import on_policy_episodes, tiny_qwen2  # noqa: E402

LOSSES = ["pg", "ppo_clip", "clip_cov", "kl_cov"]


@pytest.fixture(scope="module", autouse=True)
def _envs() -> None:
    register_once()
    register_faulty_envs()


def _gradient(model, config: TrainerConfig, batch: TrainBatch, ref_model=None) -> torch.Tensor:
    updater = PolicyUpdater(model, config, ref_model=ref_model)
    updater.accumulate_gradients(updater.prepare(batch))
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _stale_batch(model) -> TrainBatch:
    """Episodes of different lengths whose rollout logprobs are the model's own, shifted by
    up to +-0.5 (as if sampled by an older policy)."""
    episodes = on_policy_episodes(model, [1, 3, 2, 4])
    noise = torch.Generator().manual_seed(3)
    stale = []
    for episode in episodes:
        shift = (torch.rand(len(episode.logprobs), generator=noise) - 0.5).tolist()
        logprobs = [
            lp + s if m else lp
            for lp, s, m in zip(episode.logprobs, shift, episode.loss_mask, strict=True)
        ]
        stale.append(with_tokens(episode, episode.token_ids, logprobs))
    return build_batch(stale, [[1.0], [-0.5] * 3, [2.0] * 2, [0.3] * 4])


# -- on-policy ratio 1 ------------------------------------------------------------------------


@pytest.mark.parametrize("decoupled", [False, True])
def test_on_policy_the_first_update_has_ratio_one(decoupled: bool) -> None:
    model = tiny_qwen2()
    batch = build_batch(on_policy_episodes(model, [2, 3]), [[1.0, 1.0], [-1.0] * 3])
    config = TrainerConfig(loss={"decoupled": decoupled}, update={"micro_batch_size": 1})
    updater = PolicyUpdater(model, config)
    policy = batch.loss_mask > 0
    gap = (updater.learner_logprobs(batch) - batch.old_logprobs)[policy].abs().max()
    assert float(gap) < 1e-5
    metrics = updater.step(batch)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["approx_kl_rollout"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["clip_fraction"] == 0.0


def test_rollouts_at_a_temperature_record_the_sampled_distribution(tmp_path: Path, tokenizer):
    # the HF engine samples at 0.7; the learner divides by the same temperature
    config = TrainerConfig(
        steps=1,
        output_dir=str(tmp_path),
        rollout={"env_id": ENV_ID, "group_size": 2, "groups_per_step": 2, "max_new_tokens": 4},
        update={"temperature": 0.7},
        log={"console": False},
    )
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    episodes = trainer.runner.run(make_tasks([ENV_ID], [0, 1], group_size=2))
    batch = build_batch(episodes, [[1.0] * e.num_turns for e in episodes])
    assert bool(batch.has_old_logprobs[batch.loss_mask > 0].all())
    ratio = (trainer.updater.learner_logprobs(batch) - batch.old_logprobs).exp()
    assert float((ratio - 1)[batch.loss_mask > 0].abs().max()) < 1e-3


def test_actions_without_engine_logprobs_are_scored_by_the_learner() -> None:
    # An engine that reports no logprobs leaves the runner's placeholder 0.0: taken at face
    # value it is a probability of 1, so every ratio would be p << 1.
    model = tiny_qwen2()
    episodes = [
        dataclasses.replace(e, turns=[dataclasses.replace(t, logprobs=[]) for t in e.turns])
        for e in on_policy_episodes(model, [2, 2])
    ]
    episodes = [_placeholder_logprobs(e) for e in episodes]
    batch = build_batch(episodes, [[1.0, 1.0], [-1.0, -1.0]])
    assert not bool(batch.has_old_logprobs.any())
    metrics = PolicyUpdater(model, TrainerConfig()).step(batch)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["clip_fraction"] == 0.0


def _placeholder_logprobs(episode: Episode) -> Episode:
    return dataclasses.replace(episode, logprobs=[0.0] * len(episode.logprobs))


# -- micro-batch invariance -------------------------------------------------------------------


@pytest.mark.parametrize("decoupled", [False, True], ids=["rollout-ratio", "decoupled"])
@pytest.mark.parametrize("policy_loss", LOSSES)
def test_the_gradient_does_not_depend_on_the_micro_batch_size(
    policy_loss: str, decoupled: bool
) -> None:
    reference = tiny_qwen2()
    batch = _stale_batch(reference)
    ref_model = tiny_qwen2(seed=5).eval()
    gradients = []
    for micro_batch_size in (4, 1):
        config = TrainerConfig(
            loss={
                "policy_loss": policy_loss,
                "decoupled": decoupled,
                "cov_ratio": 0.3,  # several tokens singled out by Clip-Cov / KL-Cov
                "clip_cov_lb": -10.0,
                "clip_cov_ub": 10.0,
                "kl_coef": 0.1,
                "entropy_coef": 0.01,
            },
            update={"micro_batch_size": micro_batch_size},
        )
        gradients.append(_gradient(copy.deepcopy(reference), config, batch, ref_model))
    assert float(gradients[0].abs().max()) > 1e-3
    torch.testing.assert_close(gradients[0], gradients[1], atol=1e-6, rtol=1e-4)


# -- stale tokens under decoupled PPO -----------------------------------------------------------


def test_stale_tokens_get_the_decoupled_ppo_gradient() -> None:
    # The rollout logprobs lag the learner by up to +-0.5 (w = pi_prox / pi_behav in
    # [0.6, 1.65], under the cap). Decoupled PPO's gradient on the first step is that of
    # sum(-A * w * logp) / N with pi_prox = the learner's policy: every stale token counts,
    # weighted. Clipping against the rollout policy instead zeroes the tokens whose ratio left
    # [0.8, 1.2] and lets the others through unweighted.
    model = tiny_qwen2()
    batch = _stale_batch(model)
    config = TrainerConfig(loss={"decoupled": True})
    gradient = _gradient(copy.deepcopy(model), config, batch)

    learner = PolicyUpdater(model, config).learner_logprobs(batch)
    mask = batch.loss_mask > 0
    weight = torch.where(mask, (learner - batch.old_logprobs).exp(), 0.0)
    assert float(weight[mask].min()) > 0.5 and float(weight[mask].max()) < 2.0
    logp, _ = sequence_logprobs(model.train(), batch.input_ids, batch.attention_mask)
    surrogate = (torch.where(mask, -batch.advantages * weight * logp, 0.0)).sum() / mask.sum()
    model.zero_grad()
    surrogate.backward()
    expected = torch.cat([p.grad.flatten() for p in model.parameters()])
    torch.testing.assert_close(gradient, expected, atol=1e-6, rtol=1e-4)
    stale_ppo = _gradient(copy.deepcopy(model), TrainerConfig(loss={"decoupled": False}), batch)
    assert not torch.allclose(stale_ppo, expected, atol=1e-4, rtol=1e-2)


# -- KL at the reference ----------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["k2", "k3"])
def test_kl_and_its_gradient_are_zero_at_the_reference(estimator: str) -> None:
    model = tiny_qwen2()
    batch = _stale_batch(model)
    plain = _gradient(copy.deepcopy(model), TrainerConfig(), batch)
    config = TrainerConfig(loss={"kl_coef": 1.0, "kl_estimator": estimator})
    with_kl = _gradient(copy.deepcopy(model), config, batch, ref_model=copy.deepcopy(model))
    torch.testing.assert_close(with_kl, plain, atol=1e-7, rtol=1e-5)
    updater = PolicyUpdater(model, config, ref_model=copy.deepcopy(model))
    assert updater.step(batch)["kl_ref"] == pytest.approx(0.0, abs=1e-6)


# -- nothing non-finite reaches the weights ---------------------------------------------------


@pytest.mark.parametrize("max_grad_norm", [1.0, None], ids=["clipping", "no-clipping"])
@pytest.mark.parametrize("field", ["advantages", "old_logprobs"])
def test_a_non_finite_batch_is_skipped_and_leaves_the_weights(
    field: str, max_grad_norm: float | None
) -> None:
    model = tiny_qwen2()
    good = _stale_batch(model)
    values = getattr(good, field).clone()
    row, col = (good.loss_mask > 0).nonzero()[0].tolist()
    values[row, col] = math.nan
    bad = dataclasses.replace(good, **{field: values})
    before = copy.deepcopy(model.state_dict())
    optim = {"max_grad_norm": max_grad_norm}
    updater = PolicyUpdater(model, TrainerConfig(optim=optim, update={"mini_batches": 2}))
    metrics = updater.step(bad)
    # the mini-batch holding the NaN is skipped, the other one is applied
    assert metrics["skipped_updates"] == 1.0 and updater.skipped_steps == 1
    assert updater.optimizer_steps == 1
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])
    # all in one mini-batch: nothing changes at all
    model.load_state_dict(before)
    updater = PolicyUpdater(model, TrainerConfig(optim=optim))
    metrics = updater.step(bad)
    assert metrics["skipped_updates"] == 1.0 and "loss" not in metrics
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], atol=0, rtol=0)
    assert not updater.optimizer.state, "the optimizer state must not see the bad step"


def _faulty_config(tmp_path: Path, env_id: str, estimator: str) -> TrainerConfig:
    return TrainerConfig(
        steps=2,
        output_dir=str(tmp_path),
        rollout={"env_id": env_id, "group_size": 2, "groups_per_step": 2, "max_new_tokens": 3},
        advantage={"estimator": estimator},
        optim={"lr": 1e-2},
        log={"console": False},
    )


def test_nan_rewards_never_reach_the_weights(tmp_path: Path, tokenizer) -> None:
    config = _faulty_config(tmp_path, NAN_REWARD_ID, "grpo")
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    history = trainer.train()
    # seeds 0, 1 then 2, 3: the even seed's group of 2 is dropped each step, the other trains
    assert [record["dropped_nonfinite"] for record in history] == [2.0, 2.0]
    assert [record["trained_episodes"] for record in history] == [2.0, 2.0]
    assert all(math.isfinite(record["loss"]) for record in history)
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


# -- errored episodes never stop a run --------------------------------------------------------


@pytest.mark.parametrize("estimator", ["rloo", "grpo", "turn_grpo", "drgrpo"])
def test_errored_episodes_never_stop_a_run(tmp_path: Path, tokenizer, estimator: str) -> None:
    # one reset in four raises: a group of two loses one episode, so the other is alone
    config = _faulty_config(tmp_path, CRASHING_ID, estimator)
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    history = trainer.train()
    assert len(history) == 2
    assert [record["errors"] for record in history] == [1.0, 1.0]
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


def test_a_step_whose_every_episode_errored_stops_the_run(tmp_path: Path, tokenizer) -> None:
    config = _faulty_config(tmp_path, ALWAYS_CRASHING_ID, "grpo")
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    with pytest.raises(EveryEpisodeErrored, match=r"step 1: all 4 episodes errored.*the env broke"):
        trainer.train()
    assert not (tmp_path / "final").exists()
