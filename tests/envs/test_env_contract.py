"""Every registered env honours the Env contract (docs/writing-envs.md), through the public checker."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import palaestra
from palaestra.testing import checker
from tests.conftest import contract_env_ids, skip_without_extra


def _maker(env_id: str):
    return lambda: palaestra.make(env_id)


def test_gymnasium_checker_passes(env_id):
    checker.check_gymnasium(_maker(env_id))


def test_reset_returns_task_and_role(env_id):
    observation, info = palaestra.make(env_id).reset(seed=0)
    assert isinstance(observation, str) and observation.strip()
    assert info.get("role", "user") == "user"


def test_same_seed_same_episode_also_across_threads(env_id):
    checker.check_determinism(_maker(env_id))


def test_random_actions_do_not_touch_the_episode_rng(env_id):
    """``random_action`` draws from its own generator, so it leaves the env's RNG unchanged."""
    env = palaestra.make(env_id)
    env.reset(seed=0)
    state = env.np_random.bit_generator.state
    env.random_action(np.random.default_rng(1))
    assert env.np_random.bit_generator.state == state


def test_oracle_gets_full_reward_and_beats_random(env_id):
    if not checker.has_oracle(palaestra.make(env_id)):
        pytest.skip(f"{env_id} has no oracle")
    checker.check_oracle(_maker(env_id))


def test_async_twins_match_sync(env_id):
    checker.check_async_twins(_maker(env_id))


def test_hostile_actions_never_raise(env_id):
    checker.check_hostile_actions(_maker(env_id))


@pytest.mark.parametrize("fuzz_env_id", contract_env_ids())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(
        st.text(max_size=200) | st.from_regex(r"\\boxed\{.{0,12}\}", fullmatch=True),
        min_size=1,
        max_size=12,
    )
)
def test_fuzzed_actions_never_raise_and_keep_reward_in_range(fuzz_env_id, actions):
    skip_without_extra(fuzz_env_id)
    checker.check_hostile_actions(_maker(fuzz_env_id), tuple(actions))
