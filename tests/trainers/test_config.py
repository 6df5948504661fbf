"""Trainer config: defaults, validation and YAML round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from palaestra.trainers.config import TrainerConfig

pytest.importorskip("yaml", reason="YAML configs need PyYAML (extra 'train')")


def test_yaml_round_trip(tmp_path: Path) -> None:
    config = TrainerConfig(
        advantage={"estimator": "turn_grpo", "gamma": 0.9},
        loss={"eps_high": 0.28, "aggregation": "seq-mean-token-sum"},
        filters={"accuracy_band": (0.1, 0.9)},
        rollout={"group_size": 4},
    )
    path = tmp_path / "run.yaml"
    config.to_yaml(path)
    assert TrainerConfig.from_yaml(path) == config


def test_partial_yaml_fills_defaults(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("steps: 5\nloss:\n  policy_loss: clip_cov\n", encoding="utf-8")
    config = TrainerConfig.from_yaml(path)
    assert config.steps == 5
    assert config.loss.policy_loss == "clip_cov"
    assert config.loss.eps_low == 0.2


def test_typo_in_a_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("loss:\n  eps_hihg: 0.3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="eps_hihg"):
        TrainerConfig.from_yaml(path)


def test_group_estimators_need_groups() -> None:
    with pytest.raises(ValidationError, match="group_size >= 2"):
        TrainerConfig(advantage={"estimator": "rloo"}, rollout={"group_size": 1})


def test_decaying_schedule_needs_a_horizon() -> None:
    with pytest.raises(ValidationError, match=r"needs optim\.total_steps"):
        TrainerConfig(optim={"schedule": "cosine"})


def test_accuracy_band_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="low <= high"):
        TrainerConfig(filters={"accuracy_band": (0.9, 0.1)})


def test_a_discount_on_an_episode_level_estimator_is_an_error() -> None:
    with pytest.raises(ValidationError, match="plain sum"):
        TrainerConfig(advantage={"estimator": "grpo", "gamma": 0.9})


def test_drgrpo_brings_its_aggregation_and_warns_when_overridden() -> None:
    assert TrainerConfig(advantage={"estimator": "drgrpo"}).loss.aggregation == (
        "seq-mean-token-sum"
    )
    assert TrainerConfig(advantage={"estimator": "grpo"}).loss.aggregation == "token-mean"
    with pytest.warns(UserWarning, match="is not Dr. GRPO"):
        TrainerConfig(advantage={"estimator": "drgrpo"}, loss={"aggregation": "token-mean"})


def test_drop_uniform_groups_needs_a_group_relative_estimator() -> None:
    with pytest.raises(ValidationError, match="not group-relative"):
        TrainerConfig(advantage={"estimator": "rebn"}, filters={"drop_uniform_groups": True})


def test_decoupled_ppo_is_on_by_default_in_async_mode_only() -> None:
    assert not TrainerConfig().decoupled
    assert TrainerConfig(rollout={"max_staleness": 1}).decoupled
    assert not TrainerConfig(rollout={"max_staleness": 1}, loss={"decoupled": False}).decoupled
    assert TrainerConfig(loss={"decoupled": True}).decoupled
