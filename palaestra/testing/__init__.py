"""Tools for testing envs: the public env checker."""

from palaestra.testing.checker import HOSTILE_ACTIONS, check_env, has_oracle, play

__all__ = ["HOSTILE_ACTIONS", "check_env", "has_oracle", "play"]
