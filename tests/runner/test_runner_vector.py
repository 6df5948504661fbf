"""Gymnasium-style vector envs: same-step autoreset that keeps the final observation and info."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import palaestra
from palaestra.runner import AsyncVectorEnv, SyncVectorEnv


def binary_search_rollout(vec, steps: int):
    """Drive GuessTheNumber envs with binary search read from each env's oracle."""
    observations, infos = vec.reset(seed=10)
    envs = vec.unwrapped.envs
    policies = [env.oracle() for env in envs]
    trace = []
    for _ in range(steps):
        actions = [policy(obs) for policy, obs in zip(policies, observations, strict=True)]
        observations, rewards, terminated, truncated, infos = vec.step(actions)
        trace.append((list(observations), rewards.tolist(), terminated.tolist(), infos))
        for i, done in enumerate(terminated | truncated):
            if done:
                policies[i] = envs[i].oracle()
    return trace


@pytest.mark.parametrize("cls", [SyncVectorEnv, AsyncVectorEnv])
def test_autoreset_keeps_final_observation_and_info(cls):
    vec = cls.from_id("game:GuessTheNumber-v0", num_envs=4)
    trace = binary_search_rollout(vec, steps=12)
    finals = [
        (infos["final_obs"][i], infos["final_info"]["success"][i], obs)
        for observations, _, terminated, infos in trace
        for i, (obs, done) in enumerate(zip(observations, terminated, strict=True))
        if done and infos["_final_obs"][i]
    ]
    assert len(finals) >= 4
    for final_observation, final_info, next_observation in finals:
        assert final_observation.startswith("Correct!")
        assert final_info is np.True_
        assert next_observation.startswith("I am thinking of an integer")  # the next task
    for _, rewards, terminated, _ in trace:
        assert rewards == [1.0 if done else 0.0 for done in terminated]
    vec.close()


def test_sync_and_async_agree():
    sync = binary_search_rollout(SyncVectorEnv.from_id("game:GuessTheNumber-v0", 3), 10)
    async_ = binary_search_rollout(AsyncVectorEnv.from_id("game:GuessTheNumber-v0", 3), 10)
    assert [(o, r, t) for o, r, t, _ in sync] == [(o, r, t) for o, r, t, _ in async_]


def test_seeds_follow_gymnasium_convention():
    vec = SyncVectorEnv.from_id("game:Wordle-v0", num_envs=2)
    by_int, _ = vec.reset(seed=5)
    secrets = [env._secret for env in vec.envs]
    vec.reset(seed=[5, 6])
    assert [env._secret for env in vec.envs] == secrets
    single = palaestra.make("game:Wordle-v0")
    single.reset(seed=6)
    assert single._secret == secrets[1]
    assert len(by_int) == 2


def test_wrong_number_of_actions_or_seeds_is_explained():
    vec = SyncVectorEnv.from_id("game:GuessTheNumber-v0", num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="got 1 actions for 2 envs"):
        vec.step(["\\boxed{1}"])
    with pytest.raises(ValueError, match="got 3 seeds for 2 envs"):
        vec.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        SyncVectorEnv.from_id("game:GuessTheNumber-v0", num_envs=0)


def test_async_vector_env_inside_an_event_loop_uses_await():
    vec = AsyncVectorEnv.from_id("game:GuessTheNumber-v0", num_envs=2)

    async def main():
        with pytest.raises(RuntimeError, match=r"await vec\.astep"):
            vec.step(["\\boxed{1}", "\\boxed{2}"])
        await vec.areset(seed=0)
        _, rewards, *_ = await vec.astep(["\\boxed{1}", "\\boxed{2}"])
        return rewards

    rewards = asyncio.run(main())
    assert isinstance(rewards, np.ndarray) and rewards.shape == (2,)


@pytest.mark.parametrize("cls", [SyncVectorEnv, AsyncVectorEnv])
def test_gymnasium_vector_wrappers_read_the_infos(cls):
    """Infos are gymnasium's dict of arrays with ``_key`` masks: its episode statistics work."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    vec = RecordEpisodeStatistics(cls.from_id("game:GuessTheNumber-v0", num_envs=3))
    trace = binary_search_rollout(vec, steps=12)
    episodes = [
        (infos["episode"]["r"][i], infos["episode"]["l"][i])
        for _, _, _, infos in trace
        if "episode" in infos
        for i in np.flatnonzero(infos["_episode"])
    ]
    assert len(episodes) >= 3
    assert all(reward == 1.0 and 1 <= length <= 10 for reward, length in episodes)
    vec.close()
