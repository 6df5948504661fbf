"""The Trainer end to end through the real Runner and HF generation with a tiny local model:
REINFORCE+ReBN and GRPO raise the reward of a small two-turn env, flipping the advantage sign
lowers it, and a run stopped at step k and resumed matches an uninterrupted one exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.trainer import Trainer  # noqa: E402
from tests.trainers.letter_env import ENV_ID, register_once  # noqa: E402

CORPUS = ["Write a few lowercase letters.", "Again.", "abc def ghi", "XYZ 123 !?"]


@pytest.fixture(scope="module", autouse=True)
def _env() -> None:
    register_once()


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.train_tokenizer(CORPUS, vocab_size=300)


def _config(tmp_path: Path, estimator: str, seed: int, **overrides) -> TrainerConfig:
    config = TrainerConfig(
        seed=seed,
        steps=12,
        output_dir=str(tmp_path / f"{estimator}-{seed}"),
        rollout={
            "env_id": ENV_ID,
            "group_size": 8,
            "groups_per_step": 4,
            "max_new_tokens": 3,
            "first_seed": 1000 * seed,
        },
        advantage={"estimator": estimator},
        optim={"lr": 3e-3},
        update={"micro_batch_size": 32},
        log={"console": False},
    )
    return config.model_copy(update=overrides)


def _train(config: TrainerConfig, tokenizer, sign: float = 1.0) -> tuple[float, float]:
    """Mean reward of the first two and of the last two steps' rollouts."""
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=config.seed), tokenizer)
    if sign < 0:
        _flip_advantages(trainer)
    rewards = [record["reward"] for record in trainer.train()]
    return sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2


def _flip_advantages(trainer: Trainer) -> None:
    """Negate every advantage the updater sees (a sign bug)."""
    step = trainer.updater.step

    def flipped(batch):
        return step(dataclasses.replace(batch, advantages=-batch.advantages))

    trainer.updater.step = flipped


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("estimator", ["rebn", "grpo"])
def test_reward_rises(tmp_path: Path, tokenizer, estimator: str, seed: int) -> None:
    start, end = _train(_config(tmp_path, estimator, seed), tokenizer)
    # episode return over 2 turns (max 2); a random-init policy writes ~20% lowercase
    assert start < 0.7, f"the random-init policy already scores {start:.3f}"
    assert end > start + 0.5, f"{estimator} seed {seed}: reward {start:.3f} -> {end:.3f}"


def test_flipped_advantages_make_reward_fall(tmp_path: Path, tokenizer) -> None:
    start, end = _train(_config(tmp_path, "rebn", 0), tokenizer, sign=-1.0)
    assert end < start / 2, f"flipped advantages: reward {start:.3f} -> {end:.3f}"


@pytest.mark.slow
def test_async_training_with_bounded_staleness_learns(tmp_path: Path, tokenizer) -> None:
    # Stale rollouts learn more slowly than on-policy ones (0.5 -> 1.0 in 12 steps, where
    # synchronous training reaches 1.3), and the versions they span depend on timing: 16 steps.
    config = _config(tmp_path, "rebn", 0, steps=16)
    config = config.model_copy(
        update={"rollout": config.rollout.model_copy(update={"max_staleness": 1})}
    )
    trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
    history = trainer.train()
    assert max(record["max_staleness"] for record in history) <= 1
    rewards = [record["reward"] for record in history]
    start, end = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert end > start + 0.5, f"async rebn: reward {start:.3f} -> {end:.3f}"
