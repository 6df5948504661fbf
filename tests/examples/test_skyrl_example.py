"""examples/skyrl_env.py: palaestra envs played through skyrl-gym the way SkyRL's generator does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym", reason="needs skyrl-gym (the 'skyrl' extra)")

EXAMPLE = Path(__file__).parents[2] / "examples" / "skyrl_env.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("skyrl_env_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from palaestra.integrations.skyrl import register_skyrl_env

    register_skyrl_env()
    return module


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0", "math:Arithmetic-Python-v0"])
def test_generator_loop_plays_oracle_episodes(example, env_id):
    from palaestra.integrations.skyrl import task_rows

    chat, total = example.generate(task_rows(env_id, [1])[0])
    assert total == 1.0
    roles = [m["role"] for m in chat]
    assert roles[-1] == "assistant" and roles.count("assistant") >= 2
    if env_id.endswith("Python-v0"):
        assert "tool" in roles
