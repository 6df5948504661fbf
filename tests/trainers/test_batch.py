"""Episodes to padded tensors: alignment, advantage broadcast and masking."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch", reason="building training batches needs torch (extra 'train')")

from palaestra.core.types import Episode, Turn  # noqa: E402
from palaestra.trainers.batch import build_batch  # noqa: E402
from tests.trainers.factories import episode  # noqa: E402


def _two_episodes() -> list[Episode]:
    # episode 0: prompt 10 11, turn 0 = action 12 + observation 13, turn 1 = action 14 + obs 15
    first = Episode(
        env_id="test:Hand-v0",
        seed=0,
        task="t",
        turns=[
            Turn("a", "o", 0.0, token_ids=[12], logprobs=[-0.5]),
            Turn("b", "", 1.0, terminated=True, token_ids=[14], logprobs=[-0.25]),
        ],
        token_ids=[10, 11, 12, 13, 14, 15],
        logprobs=[0.0, 0.0, -0.5, 0.0, -0.25, 0.0],
        loss_mask=[0, 0, 1, 0, 1, 0],
        turn_index=[-1, -1, 0, 0, 1, 1],
    )
    # episode 1: prompt 20, turn 0 = two action tokens 21 22
    second = Episode(
        env_id="test:Hand-v0",
        seed=1,
        task="t",
        turns=[Turn("c", "", 1.0, terminated=True, token_ids=[21, 22], logprobs=[-1.0, -2.0])],
        token_ids=[20, 21, 22],
        logprobs=[0.0, -1.0, -2.0],
        loss_mask=[0, 1, 1],
        turn_index=[-1, 0, 0],
    )
    return [first, second]


def test_tensors_are_padded_and_advantages_broadcast_per_turn() -> None:
    batch = build_batch(_two_episodes(), [[2.0, -1.0], [3.0]], pad_token_id=7)
    assert batch.input_ids.tolist() == [[10, 11, 12, 13, 14, 15], [20, 21, 22, 7, 7, 7]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]
    # prompt tokens get 0; each token gets its turn's advantage; padding gets 0
    assert batch.advantages.tolist() == [[0, 0, 2, 2, -1, -1], [0, 3, 3, 0, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0]]
    assert batch.old_logprobs.tolist() == [[0, 0, -0.5, 0, -0.25, 0], [0, -1, -2, 0, 0, 0]]
    assert batch.num_loss_tokens == 4 and batch.num_loss_sequences == 2


def test_env_token_switch_trains_on_observation_tokens_too() -> None:
    batch = build_batch(_two_episodes(), [[2.0, -1.0], [3.0]], train_on_env_tokens=True)
    # every token after the prompt, observations 13 and 15 included
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]]
    # only engine tokens carry rollout logprobs
    assert batch.has_old_logprobs.tolist()[0] == [False, False, True, False, True, False]


def test_the_first_token_is_never_trained_on() -> None:
    lone = episode([1.0], prompt_tokens=0)  # turn_index starts at 0 with loss_mask 1
    batch = build_batch([lone], [[1.0]])
    assert batch.loss_mask[0, 0] == 0


def test_micro_batches_cover_the_batch_and_trim_padding() -> None:
    batch = build_batch(_two_episodes(), [[2.0, -1.0], [3.0]])
    first, second = batch.micro_batches(1)
    assert first.input_ids.shape == (1, 6)
    assert second.input_ids.tolist() == [[20, 21, 22]]
    assert second.advantages.tolist() == [[0, 3, 3]]


def test_with_old_logprobs_fills_only_missing_positions() -> None:
    batch = build_batch(_two_episodes(), [[2.0, -1.0], [3.0]], train_on_env_tokens=True)
    filled = batch.with_old_logprobs(torch.full_like(batch.old_logprobs, -9.0))
    assert filled.old_logprobs.tolist()[0] == [-9, -9, -0.5, -9, -0.25, -9]


def test_bad_inputs_name_the_problem() -> None:
    good = _two_episodes()
    with pytest.raises(ValueError, match="2 turns but 1 advantages"):
        build_batch(good, [[1.0], [1.0]])
    broken = dataclasses.replace(good[0], loss_mask=[0, 1])
    with pytest.raises(ValueError, match=r"token fields must all have len\(token_ids\) = 6"):
        build_batch([broken], [[1.0, 1.0]])
    errored = dataclasses.replace(good[0], error="boom")
    with pytest.raises(ValueError, match="drop errored episodes"):
        build_batch([errored], [[1.0, 1.0]])
    with pytest.raises(ValueError, match="zero episodes"):
        build_batch([], [])
