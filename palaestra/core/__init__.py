"""Core API: the `Env` base class, text spaces, the registry, wrappers and trajectory types."""

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.registry import (
    EnvSpec,
    UnknownEnvError,
    deregister,
    gymnasium_id,
    list_envs,
    load_plugins,
    make,
    register,
    spec,
)
from palaestra.core.spaces import TextSpace
from palaestra.core.types import Episode, Message, Turn
from palaestra.core.wrappers import HistoryObservation, RewardNoise, TurnLimit

__all__ = [
    "Env",
    "EnvSpec",
    "Episode",
    "HistoryObservation",
    "Message",
    "Policy",
    "ResetResult",
    "RewardNoise",
    "StepResult",
    "TextSpace",
    "Turn",
    "TurnLimit",
    "UnknownEnvError",
    "deregister",
    "gymnasium_id",
    "list_envs",
    "load_plugins",
    "make",
    "register",
    "spec",
]
