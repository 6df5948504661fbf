"""Shared test helpers."""

from __future__ import annotations

import numpy as np
import pytest

import palaestra
from palaestra.core.env import Env


def play_episode(env: Env, seed: int, policy: str = "oracle", rng_seed: int = 0) -> list[tuple]:
    """Play one episode with the env's oracle or random agent; returns the transcript."""
    observation, _ = env.reset(seed=seed)
    transcript: list[tuple] = [("reset", observation)]
    rng = np.random.default_rng(rng_seed)
    act = env.oracle() if policy == "oracle" else (lambda _obs: env.random_action(rng))
    for _ in range(1000):
        action = act(observation)
        observation, reward, terminated, truncated, info = env.step(action)
        transcript.append((action, observation, reward, terminated, truncated, info.get("success")))
        if terminated or truncated:
            return transcript
    raise AssertionError("episode did not end within 1000 steps")


def has_oracle(env: Env) -> bool:
    env.reset(seed=0)
    try:
        env.oracle()
    except NotImplementedError:
        return False
    return True


RG_REPRESENTATIVES = (
    "rg:basic_arithmetic-v0",
    "rg:basic_arithmetic-Retry-v0",
    "rg:sudoku-v0",
    "rg:graph_color-v0",
)
"""The rg: ids the contract suite runs; every rg: task has its own check in
tests/envs/math/test_reasoning_gym.py (running the full contract on ~200 ids is too slow)."""


def contract_env_ids() -> list[str]:
    """Every registered id, with the rg: family cut to a few representatives."""
    ids = [i for i in palaestra.list_envs() if not i.startswith("rg:")]
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        return ids
    return ids + list(RG_REPRESENTATIVES)


@pytest.fixture(params=contract_env_ids())
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param
