"""A task pool a policy cannot memorise: each episode's database is drawn from the reset seed
(an int ``db_seed`` pins one), so ids, digits and answers vary; tasks are distinct; no request
already holds its answer; every id has requests the policy refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

import palaestra
from palaestra.envs.tools.backend import REFUSAL_SHARE, state_hash
from palaestra.envs.tools.env import EPISODE_DATABASE, ToolUseEnv, database
from palaestra.envs.tools.facts import REASON, values

IDS = [f"tools:{domain}{level}-v0" for domain in ("Shop", "Bank", "Clinic")
       for level in ("-Easy", "", "-Hard")]  # fmt: skip


def task_key(task) -> tuple:
    actions = json.dumps([(a.name, a.arguments) for a in task.actions], default=str)
    return task.request, tuple(fact.text for fact in task.facts), actions


@pytest.mark.parametrize(
    "seeds",
    [30, pytest.param(1000, marks=[pytest.mark.slow, pytest.mark.timeout(3600)])],
)  # 1,000 databases built: minutes on 2 shared cores
@pytest.mark.parametrize("env_id", IDS)
def test_tasks_are_distinct_refusals_are_drawn_and_no_request_holds_its_answer(env_id, seeds):
    env = palaestra.make(env_id)
    keys, refusals = set(), 0
    for seed in range(seeds):
        env.reset(seed=seed)
        task = env.unwrapped.task
        keys.add(task_key(task))
        refusals += any(fact.kind == REASON for fact in task.report)
        known = values(" ".join((task.request, *(f.text for f in task.facts))), task.vocabulary)
        assert not [f for f in task.report if f.value in known[f.kind]], (seed, task.request)
    assert len(keys) >= 0.9 * seeds  # was 172 per 1,000 seeds on Shop-Hard
    assert 0.1 <= refusals / seeds <= 2 * REFUSAL_SHARE


def test_each_episode_draws_its_database_from_the_reset_seed():
    env = ToolUseEnv("bank")
    hashes = {}
    for seed in (0, 1, 2, 1_000_000):
        env.reset(seed=seed)
        hashes[seed] = state_hash(env.backend.db)
        env.reset(seed=seed)
        assert state_hash(env.backend.db) == hashes[seed]  # the same seed, the same database
    assert len(set(hashes.values())) == 4  # eval seeds (1,000,000 on) get databases of their own
    assert database(env.backend_type, (1_000_000, EPISODE_DATABASE)) is database(
        env.backend_type, (1_000_000, EPISODE_DATABASE)
    )  # built once while recently used
    pinned = ToolUseEnv("bank", db_seed=7)
    for seed in (0, 1):
        pinned.reset(seed=seed)
        assert state_hash(pinned.backend.db) == state_hash(
            pinned.backend_type.generate(np.random.default_rng(7))
        )


def test_answers_vary_with_the_seed():
    """New cards' digits and new accounts' numbers differ across episodes (every card
    replacement used to give 6936, every new account A1065)."""
    env = palaestra.make("tools:Bank-v0")
    answers: dict[str, set[str]] = {"last four": set(), "id": set()}
    for seed in range(20):
        env.reset(seed=seed)
        for fact in env.unwrapped.task.report:
            answers.get(fact.kind, set()).add(fact.value)
    assert len(answers["last four"]) >= 3 and len(answers["id"]) >= 2
