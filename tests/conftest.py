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


@pytest.fixture(params=palaestra.list_envs())
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param
