"""TRL bridges: env rewards for single-turn GRPO, task datasets, and EnvRollout called by a real
GRPOTrainer (trl 1.16) exactly where TRL calls a rollout_func.

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


# EnvRollout through TRL's own call site: GRPOTrainer._generate calls rollout_func(prompts,
# trainer), checks the keys, turns env_mask into its tool mask and passes the other fields
# on to the reward functions.

THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}"
)


def _trainer(tmp_path, *, template=None, **config):
    pytest.importorskip("trl", reason="needs the 'trl' extra")
    from trl import GRPOConfig, GRPOTrainer

    from palaestra.trainers import tiny

    tokenizer = tiny.train_tokenizer(
        ["I am thinking of an integer between 1 and 4."], vocab_size=300
    )
    if template is not None:
        tokenizer.chat_template = template
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        **config,
    )
    return GRPOTrainer(
        model=tiny.tiny_qwen2(len(tokenizer), seed=0, init_std=0.1),
        reward_funcs=trl_bridge.episode_return,
        args=args,
        train_dataset=trl_bridge.task_dataset(ENV_ID, range(4), env_kwargs={"max_number": 4}),
        processing_class=tokenizer,
        rollout_func=trl_bridge.EnvRollout(max_turns=3),
    )


ENV_ID = "game:GuessTheNumber-v0"


def _generate(trainer, seeds=(0, 0, 0, 0)):
    prompts = [
        trl_bridge.task_dataset(ENV_ID, [s], env_kwargs={"max_number": 4})[0]["prompt"]
        for s in seeds
    ]
    prompt_ids, completion_ids, env_mask, _, logprobs, extra, *_ = trainer._generate(prompts)
    return prompt_ids, completion_ids, env_mask, logprobs, extra


@pytest.fixture(autouse=True)
def _quiet_trl(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def test_trainer_sampling_options_reach_the_generation(tmp_path):
    greedy = _trainer(
        tmp_path, top_k=1, max_completion_length=64, generation_kwargs={"max_new_tokens": 5}
    )
    _, completions, mask, _, _ = _generate(greedy)
    first_turns = {
        tuple(ids[: row.index(0) if 0 in row else len(row)])
        for ids, row in zip(completions, mask, strict=True)
    }
    assert len(first_turns) == 1  # top_k=1: the four samples of a group agree
    assert all(len(turn) <= 5 for turn in first_turns)  # generation_kwargs' per-turn cap
    sampled = _trainer(tmp_path, max_completion_length=64, generation_kwargs={"max_new_tokens": 5})
    _, completions, mask, _, _ = _generate(sampled)
    assert len({tuple(ids) for ids in completions}) > 1


def test_chat_template_kwargs_reach_the_template(tmp_path):
    trainer = _trainer(
        tmp_path,
        template=THINKING_TEMPLATE,
        chat_template_kwargs={"enable_thinking": False},
        max_completion_length=32,
        generation_kwargs={"max_new_tokens": 4},
    )
    prompt_ids, *_ = _generate(trainer)
    text = trainer.processing_class.decode(prompt_ids[0])
    assert text.endswith("<|im_start|>assistant\n<think></think>")


@pytest.mark.parametrize("budget", [3, 20, 60])
def test_max_completion_length_ends_the_episode_while_playing(tmp_path, budget):
    trainer = _trainer(
        tmp_path, max_completion_length=budget, generation_kwargs={"max_new_tokens": 6}
    )
    _, completions, mask, logprobs, extra = _generate(trainer, seeds=(0, 1, 2, 3))
    assert all(len(ids) <= budget for ids in completions)
    assert all(
        len(ids) == len(row) == len(lp)
        for ids, row, lp in zip(completions, mask, logprobs, strict=True)
    )
    reasons = set(extra["truncation_reason"])
    assert reasons <= {"token_budget", "runner_max_turns", None}
    if budget == 3:
        assert reasons == {"token_budget"} and extra["episode_return"] == [0.0] * 4
