import pytest

import palaestra
from palaestra.core import HistoryObservation, RewardNoise, TurnLimit


def test_turn_limit_truncates_with_reason():
    env = TurnLimit(palaestra.make("game:GuessTheNumber-Hard-v0"), max_turns=2)
    env.reset(seed=0)
    assert env.step("garbage")[3] is False
    *_, truncated, info = env.step("garbage")
    assert truncated and info["truncation_reason"] == "turn_limit"
    env.reset(seed=0)
    assert env.step("garbage")[3] is False  # the count restarts at reset
    with pytest.raises(ValueError):
        TurnLimit(palaestra.make("game:Wordle-v0"), max_turns=0)


def test_concat_history_carries_the_transcript():
    env = HistoryObservation(palaestra.make("game:GuessTheNumber-v0"), max_chars=None)
    task, _ = env.reset(seed=0)
    observation, *_ = env.step("\\boxed{1}")
    assert observation.startswith(task)
    assert "Your action:\n\\boxed{1}" in observation and "too low" in observation
    observation, *_ = env.step("\\boxed{2}")
    assert observation.count("Your action:") == 2
    short = HistoryObservation(palaestra.make("game:GuessTheNumber-v0"), max_chars=50)
    short.reset(seed=0)
    assert len(short.step("\\boxed{1}")[0]) == 50


def test_last_mode_passes_observations_through():
    env = HistoryObservation(palaestra.make("game:GuessTheNumber-v0"), mode="last")
    plain = palaestra.make("game:GuessTheNumber-v0")
    assert env.reset(seed=0) == plain.reset(seed=0)
    assert env.step("\\boxed{1}") == plain.step("\\boxed{1}")


def _final_rewards(env, seeds):
    rewards = []
    for seed in seeds:
        env.reset(seed=seed)
        policy = env.unwrapped.oracle()
        obs, done, reward, info = "", False, 0.0, {}
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            done = terminated or truncated
        rewards.append((reward, info.get("clean_reward")))
    return rewards


def test_reward_noise_flips_at_the_given_rate_and_is_seeded():
    seeds = range(200)
    always = _final_rewards(
        RewardNoise(palaestra.make("game:GuessTheNumber-Easy-v0"), flip_prob=1.0), seeds
    )
    assert all(r == (0.0, 1.0) for r in always)
    never = _final_rewards(
        RewardNoise(palaestra.make("game:GuessTheNumber-Easy-v0"), flip_prob=0.0), seeds
    )
    assert all(r == (1.0, 1.0) for r in never)
    noisy_env = RewardNoise(palaestra.make("game:GuessTheNumber-Easy-v0"), flip_prob=0.3)
    first, second = _final_rewards(noisy_env, seeds), _final_rewards(noisy_env, seeds)
    assert first == second
    flipped = sum(r == 0.0 for r, _ in first) / len(first)
    assert 0.2 < flipped < 0.4


def test_reward_noise_validates_arguments():
    with pytest.raises(ValueError, match="flip_prob"):
        RewardNoise(palaestra.make("game:Wordle-v0"), flip_prob=1.5)


def test_wrappers_are_envs_that_forward_what_describes_the_env():
    inner = palaestra.make("game:Wordle-v0")
    env = TurnLimit(inner, 2)
    assert isinstance(env, palaestra.Env) and env.unwrapped is inner
    assert (env.system_prompt, env.tools, env.reward_range) == (
        inner.system_prompt,
        inner.tools,
        inner.reward_range,
    )
    assert env.max_turns == 2 and TurnLimit(inner, 99).max_turns == inner.max_turns
    env.reset(seed=0)
    assert env.oracle()("") == inner.oracle()("")
    assert env.answer_pool == "common"  # other attributes pass through
    with pytest.raises(TypeError, match="wraps palaestra envs"):
        TurnLimit(object(), 2)


def test_async_twins_go_through_the_hooks():
    import asyncio

    env = TurnLimit(palaestra.make("game:GuessTheNumber-Hard-v0"), max_turns=2)

    async def play():
        await env.areset(seed=0)
        await env.astep("garbage")
        return await env.astep("garbage")

    *_, truncated, info = asyncio.run(play())
    assert truncated and info["truncation_reason"] == "turn_limit"


def test_registered_wrapper_stacks_are_built_by_make_and_shown_by_spec():
    from palaestra.core import WrapperSpec, deregister

    palaestra.register(
        "test:ShortWordle-v0",
        "palaestra.envs.games.wordle:Wordle",
        wrappers=[
            WrapperSpec("palaestra.core.wrappers:TurnLimit", {"max_turns": 2}),
            WrapperSpec("palaestra.core.wrappers:HistoryObservation"),
        ],
    )
    try:
        env = palaestra.make("test:ShortWordle-v0")
        assert isinstance(env, HistoryObservation) and isinstance(env.env, TurnLimit)
        assert env.max_turns == 2
        assert palaestra.spec("test:ShortWordle-v0").wrapper_stack == (
            "HistoryObservation() <- TurnLimit(max_turns=2)"
        )
        assert env.spec.kwargs["id"] == "test:ShortWordle-v0"
    finally:
        deregister("test:ShortWordle-v0")
