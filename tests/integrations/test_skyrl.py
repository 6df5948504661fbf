"""palaestra envs as skyrl-gym BaseTextEnvs: SkyRL's init/step contract, multi-turn and tools.

skyrl-gym is the real package; SkyRL's trainer (``skyrl.train``; skyrl 0.3.0 on PyPI) does not
import on Python 3.11 (its generator module needs 3.12) and pins a GPU stack, so
:func:`skyrl_rollout` repeats what its ``SkyRLGymGenerator.agent_loop`` does
with an env (skyrl/train/generators/skyrl_gym_generator.py at NovaSky-AI/SkyRL a9564572:
``env_extras["max_turns"] = generator max_turns``, ``skyrl_gym.make``, ``init``, ``step``
until ``done``, ``get_metrics``, ``close``) on rows read as its ``PromptDataset`` reads them
(``datasets.load_dataset("parquet")``, the row minus ``prompt`` and ``env_class`` as extras).
"""

from __future__ import annotations

import pytest

import palaestra
from palaestra.agents import OracleAgent
from palaestra.runner import Runner, make_tasks

skyrl_gym = pytest.importorskip("skyrl_gym", reason="needs skyrl-gym (the 'skyrl' extra)")
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from palaestra.integrations.skyrl import PalaestraTextEnv, register_skyrl_env, task_rows  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _registered():
    register_skyrl_env()
    register_skyrl_env()  # idempotent


def _make(env_id: str, seed: int, **kwargs) -> PalaestraTextEnv:
    row = task_rows(env_id, [seed], env_kwargs=kwargs or None)[0]
    return skyrl_gym.make("palaestra", env_config={}, extras=row)


def test_rows_name_the_task_and_prompt_the_seeded_episode():
    rows = task_rows("game:GuessTheNumber-v0", [3, 4])
    native = palaestra.make("game:GuessTheNumber-v0")
    assert rows[0]["env_class"] == "palaestra"
    assert rows[0]["extra_info"] == {
        "env_id": "game:GuessTheNumber-v0",
        "seed": 3,
        "env_kwargs": "{}",
    }
    assert rows[1]["prompt"][-1]["content"] == native.reset(seed=4)[0]


def test_multi_turn_step_contract_matches_the_runner():
    env = _make("game:GuessTheNumber-v0", 5)
    assert isinstance(env, BaseTextEnv)
    chat, metadata = env.init([{"role": "user", "content": "ignored"}])
    assert chat[0]["role"] == "system" and metadata == {"env_id": "game:GuessTheNumber-v0"}
    policy = env.env.oracle()
    outputs = []
    while not outputs or not outputs[-1]["done"]:
        outputs.append(
            env.step(policy((outputs[-1]["observations"] if outputs else chat)[-1]["content"]))
        )
    assert all(
        len(o["observations"]) == 1 and o["observations"][0]["role"] == "user" for o in outputs[:-1]
    )
    assert outputs[-1]["observations"] == []
    assert outputs[-1]["metadata"] == {"success": True, "truncation_reason": None}
    reference = Runner(OracleAgent()).run(make_tasks(["game:GuessTheNumber-v0"], [5]))[0]
    assert [o["reward"] for o in outputs] == reference.rewards
    assert env.get_metrics() == {
        "turns": reference.num_turns,
        "return": 1.0,
        "success": 1.0,
        "truncated": 0.0,
    }


def test_tool_results_come_back_as_tool_messages():
    env = _make("math:Arithmetic-Python-v0", 0)
    chat, _ = env.init([])
    policy = env.env.oracle()
    first = env.step(policy(chat[-1]["content"]))
    assert first["observations"][0]["role"] == "tool" and not first["done"]
    final = env.step(policy(first["observations"][0]["content"]))
    assert final["done"] and final["reward"] == 1.0


def test_retrieved_text_that_continues_the_message_comes_back_as_a_user_message():
    pytest.importorskip("bm25s", reason="search envs need the 'search' extra")
    env = _make("search:Synthetic-SearchR1-v0", 0)
    env.init([])
    out = env.step("<search>who</search>")
    assert not out["done"]
    assert [m["role"] for m in out["observations"]] == ["user"]
    assert "<information>" in out["observations"][0]["content"]


def test_the_turn_budget_ends_an_episode():
    env = _make("game:GuessTheNumber-v0", 0)
    env.init([])
    steps = [env.step("no guess here") for _ in range(env.max_turns)]
    assert [s["done"] for s in steps] == [False] * (env.max_turns - 1) + [True]
    assert env.get_metrics()["success"] == 0.0
    assert steps[-1]["metadata"]["truncation_reason"] is None  # out of guesses: the env ended it


def skyrl_rollout(
    extras: dict, prompt: list, policy, max_turns: int
) -> tuple[list, list[float], dict]:
    """One episode as SkyRL's generator plays it (see the module docstring)."""
    extras = {**extras, "max_turns": max_turns}
    env = skyrl_gym.make("palaestra", env_config={}, extras=extras)
    chat, _ = env.init(prompt)
    rewards, output = [], {"done": False}
    while not output["done"]:
        output = env.step(policy(chat[-1]["content"]))
        chat += output["observations"]
        rewards.append(output["reward"])
    metrics = {**env.get_metrics(), **output["metadata"]}
    env.close()
    return chat, rewards, metrics


def test_the_generators_max_turns_ends_the_episode():
    row = task_rows("game:GuessTheNumber-v0", [0])[0]
    _, rewards, metrics = skyrl_rollout(row, row["prompt"], lambda obs: r"\boxed{1}", max_turns=3)
    assert len(rewards) == 3 and metrics["truncation_reason"] == "runner_max_turns"
    _, rewards, metrics = skyrl_rollout(row, row["prompt"], lambda obs: r"\boxed{1}", max_turns=50)
    assert len(rewards) == 10 and metrics["truncation_reason"] is None  # the env's own end


def test_a_parquet_file_mixing_envs_with_different_kwargs(tmp_path):
    datasets = pytest.importorskip("datasets", reason="needs the 'datasets' extra")
    from palaestra.integrations.export import write_rows

    rows = task_rows("game:GuessTheNumber-v0", [0, 1], env_kwargs={"max_number": 4})
    rows += task_rows("game:Wordle-v0", [0])
    rows += task_rows("math:Arithmetic-Python-v0", [0], env_kwargs={"num_terms": 3})
    write_rows(rows, tmp_path / "train.parquet")
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "train.parquet"))["train"]
    for row in loaded:
        prompt, extras = row.pop("prompt"), {k: v for k, v in row.items() if k != "env_class"}
        env = skyrl_gym.make("palaestra", env_config={}, extras=extras)
        chat, _ = env.init(prompt)
        assert chat == prompt  # the same seeded episode the row was written from
        env.close()
    guess = skyrl_gym.make("palaestra", env_config={}, extras=loaded[0])
    assert guess.env.max_number == 4


def test_a_row_without_a_task_is_refused():
    with pytest.raises(KeyError, match="env_id"):
        skyrl_gym.make("palaestra", env_config={}, extras={"extra_info": {}})
