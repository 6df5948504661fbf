"""``palaestra train``: argument errors, a run from a YAML config, --resume, the cpu-demo."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app

runner = CliRunner()


def test_train_needs_a_config_or_a_preset() -> None:
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2 and "give a CONFIG file or --preset" in result.output


def test_train_rejects_an_unknown_preset() -> None:
    result = runner.invoke(app, ["train", "--preset", "gpu-giant"])
    assert result.exit_code == 2 and "unknown preset 'gpu-giant'" in result.output


def test_train_reports_an_invalid_config(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("stpes: 3\n", encoding="utf-8")
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 2 and "stpes" in result.output


def test_train_from_a_config_then_resume(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    from palaestra.trainers import tiny
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.metrics_log import read_metrics
    from tests.trainers.letter_env import ENV_ID, register_once

    register_once()
    tokenizer = tiny.train_tokenizer(["Write a few lowercase letters.", "Again."], vocab_size=280)
    model_dir = tmp_path / "init"
    tiny.tiny_qwen2(len(tokenizer)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = TrainerConfig(
        steps=2,
        model={"path": str(model_dir)},
        rollout={"env_id": ENV_ID, "group_size": 2, "groups_per_step": 2, "max_new_tokens": 2},
        advantage={"estimator": "grpo"},
    )
    path = tmp_path / "run.yaml"
    config.to_yaml(path)
    out = tmp_path / "out"

    first = runner.invoke(app, ["train", str(path), "--output-dir", str(out), "-q"])
    assert first.exit_code == 0, first.output
    assert "done: 2 steps" in first.output
    resumed = runner.invoke(
        app, ["train", str(path), "--output-dir", str(out), "--steps", "3", "--resume", "-q"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "resumed at step 2" in resumed.output
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]
    assert (out / "checkpoints" / "step-000003").is_dir()
    assert (out / "final" / "config.json").exists()


@pytest.mark.slow
def test_cpu_demo_preset_writes_metrics_plot_and_a_rerunnable_config(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    out = tmp_path / "demo"
    result = runner.invoke(
        app, ["train", "--preset", "cpu-demo", "--output-dir", str(out), "--steps", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "eval reward (held-out seeds)" in result.output
    for name in ("metrics.jsonl", "config.yaml", "init/config.json", "final/config.json"):
        assert (out / name).exists(), name
    pytest.importorskip("matplotlib", reason="the PNG plot needs matplotlib")
    assert (out / "reward_curve.png").stat().st_size > 0
