"""Core API: the `Env` base class, text spaces, the registry, wrappers, messages, tool-call
formats and trajectory types."""

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.core.messages import Message
from palaestra.core.registry import (
    EnvSpec,
    UnknownEnvError,
    Variant,
    WrapperSpec,
    deregister,
    gymnasium_id,
    list_envs,
    load_plugins,
    make,
    register,
    register_lazy_family,
    spec,
)
from palaestra.core.spaces import TextSpace
from palaestra.core.tool_calls import ToolCall, ToolCallFormat, register_tool_format, tool_format
from palaestra.core.types import Episode, Turn
from palaestra.core.wrappers import HistoryObservation, RewardNoise, TurnLimit, Wrapper

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
    "ToolCall",
    "ToolCallFormat",
    "Turn",
    "TurnLimit",
    "UnknownEnvError",
    "Variant",
    "Wrapper",
    "WrapperSpec",
    "deregister",
    "gymnasium_id",
    "list_envs",
    "load_plugins",
    "make",
    "register",
    "register_lazy_family",
    "register_tool_format",
    "spec",
    "tool_format",
]
