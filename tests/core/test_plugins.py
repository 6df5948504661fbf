"""A third-party package registers envs through the ``palaestra.envs`` entry-point group."""

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import palaestra
from palaestra.core import deregister, load_plugins
from palaestra.testing import check_env

PLUGIN_SOURCE = Path(__file__).parent.parent / "plugin_package"


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """Install the example plugin package with pip into a private directory on sys.path."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(PLUGIN_SOURCE),
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.syspath_prepend(str(target))
    yield
    deregister("plugin:Echo-v0")
    deregister("plugin:Echo-Loud-v0")
    sys.modules.pop("palaestra_example_plugin", None)


def test_entry_point_registration(installed_plugin):
    assert "plugin:Echo-v0" not in palaestra.list_envs()
    assert "example" in load_plugins()
    assert load_plugins() == []  # idempotent: nothing new to load
    assert {"plugin:Echo-v0", "plugin:Echo-Loud-v0"} <= set(palaestra.list_envs("plugin:*"))
    env = palaestra.make("plugin:Echo-Loud-v0")
    env.reset(seed=0)
    observation, reward, terminated, *_ = env.step("hello")
    assert (observation, reward, terminated) == ("HELLO", 1.0, True)
    assert gym.make("palaestra/plugin-Echo-v0").unwrapped.loud is False
    check_env("plugin:Echo-v0")  # what the plugin's own CI runs
