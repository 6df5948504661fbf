"""Learning and resume tests: advantages + batch + update + checkpoints on a two-turn token bandit with a tiny Qwen2.

The policy sees a fixed prompt per task and emits two turns of two tokens each; a turn's reward
is the fraction of its tokens that lie in a target set of 8 of the 64 vocabulary tokens, so a
random-init policy starts near 1/8 per turn. Rollouts are sampled in the test (the runner is
not involved), with the exact token logprobs the update needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the learning tests need torch (extra 'train')")
pytest.importorskip("transformers", reason="the tiny test model needs transformers")

from palaestra.core.types import Episode, Turn  # noqa: E402
from palaestra.trainers.advantages import compute_advantages  # noqa: E402
from palaestra.trainers.batch import build_batch  # noqa: E402
from palaestra.trainers.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from palaestra.trainers.config import TrainerConfig  # noqa: E402
from palaestra.trainers.update import PolicyUpdater  # noqa: E402
from tests.trainers.tiny_model import tiny_qwen2  # noqa: E402

TARGET = 8  # tokens 0..7 are rewarded
TURNS, TOKENS_PER_TURN = 2, 2
TASKS, GROUP_SIZE, STEPS = 4, 8, 12


def _rollouts(model, generator: torch.Generator | None) -> list[Episode]:
    """GROUP_SIZE episodes for each of TASKS prompts, sampled token by token at temperature 1
    (from the global torch RNG when ``generator`` is None)."""
    prompts = torch.arange(TASKS).repeat_interleave(GROUP_SIZE)[:, None] + torch.tensor([40, 50])
    ids = prompts.clone()
    logprobs = []
    with torch.no_grad():
        for _ in range(TURNS * TOKENS_PER_TURN):
            log_probs = torch.log_softmax(model(input_ids=ids).logits[:, -1].float(), dim=-1)
            token = torch.multinomial(log_probs.exp(), 1, generator=generator)
            logprobs.append(log_probs.gather(-1, token))
            ids = torch.cat([ids, token], dim=1)
    completion = ids[:, prompts.shape[1] :]
    hits = (completion < TARGET).float().view(len(ids), TURNS, TOKENS_PER_TURN).mean(-1)
    token_logprobs = torch.cat(logprobs, dim=1)
    episodes = []
    for row in range(len(ids)):
        turns = [Turn(action="", observation="", reward=float(r)) for r in hits[row]]
        turns[-1].terminated = True
        prompt_len = prompts.shape[1]
        episodes.append(
            Episode(
                env_id="test:TokenBandit-v0",
                seed=row // GROUP_SIZE,
                task="",
                turns=turns,
                group_id=row // GROUP_SIZE,
                token_ids=ids[row].tolist(),
                logprobs=[0.0] * prompt_len + token_logprobs[row].tolist(),
                loss_mask=[0] * prompt_len + [1] * TURNS * TOKENS_PER_TURN,
                turn_index=[-1] * prompt_len
                + [t for t in range(TURNS) for _ in range(TOKENS_PER_TURN)],
            )
        )
    return episodes


def _config(estimator: str, seed: int) -> TrainerConfig:
    return TrainerConfig(
        seed=seed,
        advantage={"estimator": estimator},
        optim={"lr": 3e-3},
        update={"micro_batch_size": 16},
    )


def _train_step(
    model, updater: PolicyUpdater, generator: torch.Generator | None, sign: float = 1.0
) -> float:
    """Collect, score, update; returns the rollouts' mean reward per turn."""
    episodes = _rollouts(model, generator)
    rewards = [episode.rewards for episode in episodes]
    groups = [episode.group_id for episode in episodes]
    config = updater.config.advantage
    advantages = compute_advantages(config.estimator, rewards, groups, gamma=config.gamma)
    advantages = [[sign * a for a in episode] for episode in advantages]
    updater.step(build_batch(episodes, advantages))
    return sum(map(sum, rewards)) / (len(rewards) * TURNS)


def _train(estimator: str, seed: int, sign: float = 1.0) -> tuple[float, float]:
    """Mean reward per turn of the first and of the last two steps' rollouts."""
    model = tiny_qwen2(seed)
    updater = PolicyUpdater(model, _config(estimator, seed))
    generator = torch.Generator().manual_seed(seed)
    means = [_train_step(model, updater, generator, sign) for _ in range(STEPS)]
    return means[0], sum(means[-2:]) / 2


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("estimator", ["rebn", "grpo"])
def test_reward_rises(estimator: str, seed: int) -> None:
    start, end = _train(estimator, seed)
    assert start < 0.25  # a random policy hits 8 of 64 tokens: about 0.125
    assert end > start + 0.4, f"{estimator} seed {seed}: reward {start:.3f} -> {end:.3f}"


@pytest.mark.parametrize("estimator", ["rebn", "grpo"])
def test_flipped_advantages_make_reward_fall(estimator: str) -> None:
    start, end = _train(estimator, seed=0, sign=-1.0)
    assert end < start / 2, f"flipped {estimator}: reward {start:.3f} -> {end:.3f}"


def test_resume_from_a_checkpoint_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    total, stop = 4, 2
    # rollouts sample from the global torch RNG, which the checkpoint must restore
    model = tiny_qwen2(seed=0)
    updater = PolicyUpdater(model, _config("grpo", 0))
    for _ in range(total):
        _train_step(model, updater, generator=None)

    interrupted = tiny_qwen2(seed=0)
    updater = PolicyUpdater(interrupted, _config("grpo", 0))
    for _ in range(stop):
        _train_step(interrupted, updater, generator=None)
    save_checkpoint(tmp_path / "ckpt", interrupted, updater, step=stop, data_position={"task": 8})
    _train_step(interrupted, updater, generator=None)  # work after the checkpoint is lost

    resumed = tiny_qwen2(seed=7)  # a fresh process: other weights, other RNG state
    updater = PolicyUpdater(resumed, _config("grpo", 0))
    meta = load_checkpoint(tmp_path / "ckpt", resumed, updater)
    assert meta == {"step": stop, "data_position": {"task": 8}}
    for _ in range(meta["step"], total):
        _train_step(resumed, updater, generator=None)
    for a, b in zip(model.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_loading_an_incomplete_checkpoint_names_the_missing_files(tmp_path: Path) -> None:
    model = tiny_qwen2()
    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"missing \['model.pt', 'trainer.pt'\]"):
        load_checkpoint(tmp_path, model, PolicyUpdater(model, _config("rebn", 0)))
