"""The Trainer's mechanics on a tiny local model: weight push, resume, eval, logs, async mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny model needs transformers (extra 'train')")

from pydantic import ValidationError  # noqa: E402

from palaestra.runner import make_tasks  # noqa: E402
from palaestra.trainers import tiny  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.metrics_log import read_metrics  # noqa: E402
from palaestra.trainers.trainer import Trainer, latest_checkpoint  # noqa: E402
from palaestra.trainers.update import sequence_logprobs  # noqa: E402
from tests.trainers.letter_env import ENV_ID  # noqa: E402

pytestmark = pytest.mark.usefixtures("letter_env")


def _config(tmp_path: Path, **overrides) -> TrainerConfig:
    data = {
        "steps": 4,
        "output_dir": str(tmp_path / "run"),
        "rollout": {"env_id": ENV_ID, "group_size": 4, "groups_per_step": 2, "max_new_tokens": 3},
        "advantage": {"estimator": "grpo"},
        "optim": {"lr": 1e-2},
        "update": {"micro_batch_size": 8},
        "log": {"console": False},
    }
    for key, value in overrides.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return TrainerConfig.model_validate(data)


def _trainer(config: TrainerConfig, tokenizer, model_seed: int = 0) -> Trainer:
    return Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=model_seed), tokenizer)


def _assert_rollouts_come_from(trainer: Trainer, model) -> None:
    """Logprobs the engine reports for a fresh episode equal ``model``'s own."""
    episode = trainer.runner.run(make_tasks([ENV_ID], [12345]))[0]
    ids = torch.tensor([episode.token_ids])
    with torch.no_grad():
        logp, _ = sequence_logprobs(model.eval(), ids, torch.ones_like(ids))
    policy = torch.tensor(episode.loss_mask, dtype=torch.bool)
    torch.testing.assert_close(
        torch.tensor(episode.logprobs)[policy], logp[0][policy], atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("max_staleness", [0, 1], ids=["shared-model", "copied-weights"])
def test_the_next_generation_uses_the_updated_weights(
    tmp_path: Path, tokenizer, max_staleness: int
) -> None:
    config = _config(tmp_path, steps=1, rollout={"max_staleness": max_staleness})
    trainer = _trainer(config, tokenizer)
    before = tiny.tiny_qwen2(len(tokenizer), seed=0)
    trainer.train()
    changed = any(
        not torch.equal(a, b)
        for a, b in zip(before.parameters(), trainer.model.parameters(), strict=True)
    )
    assert changed, "one update at lr 1e-2 must move the weights"
    _assert_rollouts_come_from(trainer, trainer.model)
    with pytest.raises(AssertionError):
        _assert_rollouts_come_from(trainer, before)


def _one_request_at_a_time(trainer: Trainer) -> Trainer:
    """Bit-identical rollouts: a request decoded beside others gets logits that differ in
    their last bits with its batch-mates, which depend on timing (docs/trainers.md)."""
    trainer.engine.agent.max_batch = 1
    return trainer


def test_resume_through_the_trainer_matches_an_uninterrupted_run(tmp_path: Path, tokenizer):
    uninterrupted = _one_request_at_a_time(_trainer(_config(tmp_path / "a"), tokenizer))
    uninterrupted.train()

    config = _config(tmp_path / "b", save_every=2)
    interrupted = _one_request_at_a_time(_trainer(config, tokenizer))
    interrupted.train(until=3)  # the checkpoint is at step 2; step 3 is lost work

    # a fresh process: other weights
    resumed = _one_request_at_a_time(_trainer(config, tokenizer, model_seed=7))
    assert resumed.resume() == 2
    assert resumed.next_seed == 2 * config.rollout.groups_per_step  # the data position
    resumed.train()
    for a, b in zip(uninterrupted.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    steps = [record["step"] for record in read_metrics(Path(config.output_dir) / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4], "the resumed run must replace the lost step's record"
    assert latest_checkpoint(config.output_dir).name == "step-000004"


def test_eval_runs_on_held_out_seeds_on_schedule(tmp_path: Path, tokenizer) -> None:
    config = _config(tmp_path, eval_every=2, eval_episodes=4, eval_first_seed=500)
    trainer = _trainer(config, tokenizer)
    seen: list[int] = []
    collect = trainer.eval_runner.collect

    async def spy(tasks):
        tasks = list(tasks)
        seen.extend(task.seed for task in tasks)
        return await collect(tasks)

    trainer.eval_runner.collect = spy
    trainer.train()
    records = read_metrics(Path(config.output_dir) / "metrics.jsonl")
    assert [r["step"] for r in records if "eval/reward" in r] == [0, 2, 4]
    assert sorted(set(seen)) == [500, 501, 502, 503]
    assert trainer.next_seed == 8 < 500


def test_eval_seeds_must_not_overlap_training_seeds() -> None:
    with pytest.raises(ValidationError, match="overlap the eval seeds"):
        TrainerConfig(steps=100, eval_every=10, eval_first_seed=50, rollout={"groups_per_step": 8})


def test_step_records_carry_the_promised_metrics(tmp_path: Path, tokenizer) -> None:
    config = _config(tmp_path, steps=1)
    record = _trainer(config, tokenizer).train()[0]
    for key in (
        "reward",
        "success",
        "entropy",
        "approx_kl_rollout",
        "clip_fraction",
        "grad_norm",
        "rollout_tokens_per_s",
        "update_tokens_per_s",
        "rollout_time",
        "update_time",
        "sync_time",
        "staleness",
    ):
        assert key in record, key
    assert record["staleness"] == 0.0
    line = (Path(config.output_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert json.loads(line)["reward"] == record["reward"]
    assert (Path(config.output_dir) / "final" / "config.json").exists()


def test_async_mode_refuses_a_shared_model(tmp_path: Path, tokenizer) -> None:
    from palaestra.agents.base import Sampling
    from palaestra.trainers.engines import HFEngine

    model = tiny.tiny_qwen2(len(tokenizer))
    engine = HFEngine(model, tokenizer, Sampling(max_tokens=3), share_model=True)
    config = _config(tmp_path, rollout={"max_staleness": 1})
    with pytest.raises(ValueError, match="share_model=False"):
        Trainer(config, model, tokenizer, engine=engine)


def test_tensorboard_without_the_package_names_the_fix(tmp_path: Path, monkeypatch) -> None:
    from palaestra.trainers.config import LogConfig
    from palaestra.trainers.metrics_log import MetricsLogger

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install tensorboard"):
        MetricsLogger(tmp_path, LogConfig(tensorboard=True))


def test_epochs_walk_every_training_row_once_and_resume_exactly(tmp_path, tokenizer):
    config = _config(
        tmp_path,
        rollout={"env_id": "math:Dataset-v0", "order": "epochs", "groups_per_step": 4},
        eval_rows=(0, 4),
    )
    trainer = _trainer(config, tokenizer)
    first_seed = config.rollout.first_seed

    def rows(step: int) -> list[int]:
        tasks = trainer.tasks(first_seed + step * config.rollout.groups_per_step)
        return [t.options["index"] for t in tasks[:: config.rollout.group_size]]

    epoch = [row for step in range(3) for row in rows(step)]  # 12 training rows: one epoch
    assert sorted(epoch) == list(range(4, 16))  # every row once, eval rows 0..3 held out
    assert [row for step in range(3, 6) for row in rows(step)] != epoch  # reshuffled
    again = _trainer(config, tokenizer)  # a resumed run computes the same order
    assert again.tasks(first_seed + 4) == trainer.tasks(first_seed + 4)
    eval_tasks = {t.options["index"] for t in trainer.eval_tasks()}
    assert eval_tasks == {0, 1, 2, 3}


def test_epoch_order_needs_a_dataset_and_eval_rows_need_epochs(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="generates its problems"):
        _trainer(_config(tmp_path, rollout={"order": "epochs"}), tokenizer)
    with pytest.raises(ValidationError, match=r"rollout\.order: epochs"):
        _config(tmp_path, eval_rows=(0, 4))
