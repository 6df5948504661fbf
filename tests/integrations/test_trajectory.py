"""split_episode and EpisodeRunner: the runner's token sequence as prompt and response, tool
results masked, one runner reused across episodes, budgets and outcome kept."""

from __future__ import annotations

import asyncio
import json

import pytest

import palaestra
from palaestra.agents.base import Action
from palaestra.envs.games.guess_the_number import GuessTheNumber
from palaestra.integrations.trajectory import (
    EpisodeRunner,
    split_episode,
    task_from_dict,
    task_prompts,
)
from palaestra.runner.tasks import Task

pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")


@pytest.fixture(scope="module")
def tool_episode():
    from palaestra.trainers import tiny
    from palaestra.trainers.sft import collect_demonstrations

    tokenizer = tiny.train_tokenizer(["What is 3 + 4?"], vocab_size=300)
    (episode,) = collect_demonstrations("math:Arithmetic-Python-v0", [0], tokenizer)
    return tokenizer, episode


def test_tool_results_are_masked_in_the_response(tool_episode):
    tokenizer, episode = tool_episode
    assert episode.turns[0].observation_role == "tool"
    trajectory = split_episode(episode)
    assert trajectory.prompt_ids + trajectory.response_ids == episode.token_ids
    ids, mask = trajectory.response_ids, trajectory.response_mask
    masked = tokenizer.decode([t for t, bit in zip(ids, mask, strict=True) if not bit])
    trained = tokenizer.decode([t for t, bit in zip(ids, mask, strict=True) if bit])
    assert "<|im_start|>tool" in masked and episode.turns[0].observation.strip() in masked
    assert "<tool_call>" in trained and "<|im_start|>tool" not in trained
    assert trajectory.reward == 1.0 and trajectory.num_turns == 2
    assert trajectory.success is True and trajectory.truncation_reason is None


class CountedGuess(GuessTheNumber):
    built = 0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        CountedGuess.built += 1


def _guesser(tokenizer, guess: str = "1"):
    ids = tokenizer.encode(rf"\boxed{{{guess}}}<|im_end|>")
    calls: list[tuple[int, int | None]] = []

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Action:
        calls.append((len(prompt_ids), max_tokens))
        return Action(rf"\boxed{{{guess}}}", ids, [-0.25] * len(ids), "stop")

    return generate, calls


def test_episode_runner_reuses_its_envs_and_keeps_the_outcome(tool_episode):
    tokenizer, _ = tool_episode
    palaestra.register("test:CountedGuess-v0", CountedGuess, override=True)
    CountedGuess.built = 0
    runner = EpisodeRunner(tokenizer, max_turns=2)
    generate, _ = _guesser(tokenizer)
    episodes = [
        asyncio.run(runner.play(Task("test:CountedGuess-v0", seed), generate)) for seed in (0, 1)
    ]
    assert CountedGuess.built == 1  # the second episode reused the first one's env
    trajectory = split_episode(episodes[0])
    assert trajectory.truncation_reason == "runner_max_turns" and trajectory.success is False
    runner.close()


def test_concurrent_episodes_use_their_own_generate(tool_episode):
    tokenizer, _ = tool_episode
    runner = EpisodeRunner(tokenizer, max_response_tokens=60)
    guessers = [_guesser(tokenizer, str(n)) for n in (1, 4)]

    async def both():
        task = Task("game:GuessTheNumber-v0", 0, {"max_number": 4})
        return await asyncio.gather(*(runner.play(task, g) for g, _ in guessers))

    episodes = asyncio.run(both())
    for episode, (n, (_, calls)) in zip(episodes, zip((1, 4), guessers, strict=True), strict=True):
        assert all(turn.action == rf"\boxed{{{n}}}" for turn in episode.turns)
        prompt = episode.loss_mask.index(1)
        assert calls[0] == (prompt, 60)  # the room left under the response budget
        assert len(episode.token_ids) <= prompt + 60
    runner.close()


def test_an_engine_error_is_recorded(tool_episode):
    tokenizer, _ = tool_episode

    async def broken(prompt_ids, max_tokens):
        raise RuntimeError("engine down")

    episode = asyncio.run(EpisodeRunner(tokenizer).play(Task("game:GuessTheNumber-v0", 0), broken))
    assert "engine down" in episode.error
    with pytest.raises(ValueError, match="errored"):
        split_episode(episode)


def test_task_dicts_carry_kwargs_as_json_and_read_back():
    (task, messages), _ = list(
        task_prompts("game:GuessTheNumber-v0", [3, 4], env_kwargs={"max_number": 9})
    )
    assert task == {
        "env_id": "game:GuessTheNumber-v0",
        "seed": 3,
        "env_kwargs": '{"max_number": 9}',
    }
    assert task_from_dict(task) == Task("game:GuessTheNumber-v0", 3, {"max_number": 9})
    assert task_from_dict({**task, "env_kwargs": {"max_number": 9}}).env_kwargs == {"max_number": 9}
    assert task_from_dict({"env_id": "x", "seed": None, "env_kwargs": None}) == Task("x")
    assert json.loads(task["env_kwargs"]) == {"max_number": 9} and messages[-1]["role"] == "user"
    with pytest.raises(KeyError, match="task_prompts"):
        task_from_dict({"seed": 1})
    with pytest.raises(TypeError, match="JSON values"):
        next(task_prompts("game:GuessTheNumber-v0", [0], env_kwargs={"max_number": object()}))
