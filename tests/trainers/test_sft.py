"""``palaestra.trainers.sft``: oracle demonstrations as tokens, and the warm start's early stop."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="SFT needs torch (extra 'train')")
pytest.importorskip("transformers", reason="SFT needs transformers (extra 'train')")

from palaestra.trainers import tiny
from palaestra.trainers.sft import collect_demonstrations, train_sft

ENV_ID = "math:Arithmetic-v0"
ENV_KWARGS = {"difficulty": "easy", "num_terms": 2, "max_value": 3, "operators": "+"}


@pytest.fixture(scope="module")
def setup():
    texts = ["Compute 1 + 2.", "\\boxed{3}", "Solve the problem."] * 10
    tokenizer = tiny.train_tokenizer(texts, vocab_size=300)
    demos = collect_demonstrations(ENV_ID, range(16), tokenizer, env_kwargs=ENV_KWARGS)
    return tokenizer, demos


def test_demonstrations_end_each_action_with_the_end_of_turn_token(setup) -> None:
    tokenizer, demos = setup
    for episode in demos:
        assert episode.success is True
        policy = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
        assert policy[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(policy[:-1]) == episode.turns[0].action


def test_train_sft_runs_every_step_without_a_stop_loss(setup) -> None:
    tokenizer, demos = setup
    model = tiny.tiny_qwen2(len(tokenizer), max_positions=128)
    losses = train_sft(model, demos, steps=6, lr=3e-3, pad_token_id=tokenizer.pad_token_id)
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_train_sft_stops_once_the_recent_loss_reaches_the_target(setup) -> None:
    tokenizer, demos = setup
    model = tiny.tiny_qwen2(len(tokenizer), max_positions=128)
    losses = train_sft(
        model,
        demos,
        steps=200,
        lr=1e-2,
        pad_token_id=tokenizer.pad_token_id,
        stop_loss=2.0,
        stop_window=3,
    )
    assert 3 <= len(losses) < 200
    assert sum(losses[-3:]) / 3 <= 2.0
    assert all(sum(losses[i - 3 : i]) / 3 > 2.0 for i in range(3, len(losses)))


def test_train_sft_rejects_an_empty_window(setup) -> None:
    tokenizer, demos = setup
    model = tiny.tiny_qwen2(len(tokenizer), max_positions=128)
    with pytest.raises(ValueError, match="stop_window must be >= 1"):
        train_sft(model, demos, steps=1, stop_loss=1.0, stop_window=0)
