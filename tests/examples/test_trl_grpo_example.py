"""examples/trl_grpo.py: TRL's GRPOTrainer trains on a multi-turn palaestra env through EnvRollout."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="needs the 'trl' extra")
torch = pytest.importorskip("torch", reason="training needs the 'train' extra")

EXAMPLE = Path(__file__).parents[2] / "examples" / "trl_grpo.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _quiet_trl(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _train_capturing_batches(trainer) -> list[dict]:
    """Train, keeping every batch TRL built from the rollouts (the loss reads these)."""
    batches = []
    build = trainer._generate_and_score_completions

    def capture(inputs):
        batch = build(inputs)
        batches.append(batch)
        return batch

    trainer._generate_and_score_completions = capture
    trainer.train()
    return batches


def _assert_env_tokens_out_of_the_loss(batch, tokenizer) -> None:
    """Every token TRL trains on is a completion token; the env's feedback is masked out."""
    loss_mask = batch["completion_mask"] * batch["tool_mask"]
    masked_out = []
    for ids, completion, mask in zip(
        batch["completion_ids"], batch["completion_mask"], loss_mask, strict=True
    ):
        env_positions = (completion == 1) & (mask == 0)
        masked_out.append(tokenizer.decode(ids[env_positions]))
    feedback = "".join(masked_out)
    # The env's feedback, as the chat template frames it, reached TRL masked.
    assert "<|im_start|>user" in feedback and "not correct" in feedback
    trained = "".join(
        tokenizer.decode(ids[mask == 1])
        for ids, mask in zip(batch["completion_ids"], loss_mask, strict=True)
    )
    assert "<|im_start|>user" not in trained


def test_one_step_masks_the_env_tokens(example, tmp_path):
    trainer = example.build_trainer(tmp_path, steps=1, sft_steps=0, groups=4)
    batches = _train_capturing_batches(trainer)
    assert len(batches) == 1  # one rollout, two optimizer steps
    _assert_env_tokens_out_of_the_loss(batches[0], trainer.processing_class)
    record = trainer.state.log_history[0]
    assert record["completions/mean_length"] > 0 and torch.isfinite(torch.tensor(record["loss"]))
    assert all(len(ids) <= 112 for ids in batches[0]["completion_ids"])  # max_completion_length


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 30 steps of 64 episodes: minutes on a busy 2-core machine
def test_the_example_learns_with_a_gradient_every_step(example, tmp_path):
    trainer = example.build_trainer(tmp_path, steps=STEPS)
    batches = _train_capturing_batches(trainer)
    records = example.step_records(trainer)
    assert len(records) == 2 * STEPS and all(r["grad_norm"] > 0 for r in records)
    curve = example.rewards(trainer)
    quarter = STEPS // 4
    first, last = sum(curve[:quarter]) / quarter, sum(curve[-quarter:]) / quarter
    assert len(curve) == STEPS and last > first + 0.1, (first, last)
    for batch in batches:
        _assert_env_tokens_out_of_the_loss(batch, trainer.processing_class)


STEPS = 30
