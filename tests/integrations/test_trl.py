"""TRL bridges without a trainer: env rewards for single-turn GRPO, task datasets for EnvRollout.

A full GRPOTrainer run with EnvRollout is in tests/examples/test_trl_grpo_example.py.
"""

from __future__ import annotations

import doctest
import json

import pytest

import palaestra
from palaestra.integrations import trl as trl_bridge
from palaestra.integrations.trajectory import task_from_dict

pytest.importorskip("datasets", reason="needs the 'datasets' extra")


def test_docstring_examples():
    pytest.importorskip("math_verify", reason="needs the 'math' extra")
    result = doctest.testmod(trl_bridge)
    assert result.attempted > 0 and result.failed == 0


def test_prompt_dataset_prompts_the_seeded_episode_and_reads_chat_completions():
    dataset = trl_bridge.prompt_dataset("game:GuessTheNumber-v0", [0], env_kwargs={"max_number": 4})
    env = palaestra.make("game:GuessTheNumber-v0", max_number=4)
    task, _ = env.reset(seed=0)
    assert dataset[0]["prompt"] == [
        {"role": "system", "content": env.system_prompt},
        {"role": "user", "content": task},
    ]
    guesses = [[{"role": "assistant", "content": rf"\boxed{{{n}}}"}] for n in range(1, 5)]
    rewards = trl_bridge.env_reward(
        guesses, task=[dataset[0]["task"]] * 4, prompts=[dataset[0]["prompt"]] * 4
    )
    assert sorted(rewards) == [0.0, 0.0, 0.0, 1.0]
    assert trl_bridge.env_reward(["garbage"], task=[dataset[0]["task"]]) == [0.0]


def test_env_reward_rewards_the_secret_only():
    dataset = trl_bridge.prompt_dataset(
        "game:GuessTheNumber-v0", range(6), env_kwargs={"max_number": 4}
    )
    env = palaestra.make("game:GuessTheNumber-v0", max_number=4)
    for row, seed in zip(dataset, range(6), strict=True):
        env.reset(seed=seed)
        rewards = trl_bridge.env_reward(
            [rf"\boxed{{{n}}}" for n in range(1, 5)], task=[row["task"]] * 4
        )
        assert sorted(rewards) == [0.0, 0.0, 0.0, 1.0]


def test_task_dataset_prompts_name_tasks():
    dataset = trl_bridge.task_dataset("game:Wordle-v0", [3, 4])
    tasks = [task_from_dict(json.loads(prompt)) for prompt in dataset["prompt"]]
    assert [(t.env_id, t.seed) for t in tasks] == [("game:Wordle-v0", 3), ("game:Wordle-v0", 4)]
    assert trl_bridge.episode_return(["a", "b"], episode_return=[0.5, 1]) == [0.5, 1.0]
