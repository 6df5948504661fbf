"""Agents: ``Agent.act(conversation) -> Action`` and its backends (``docs/runner.md``, Agents).

Model backends (``openai``, ``vllm``, ``hf``) import their heavy dependencies only when
built; :func:`make_agent` builds any agent from a spec string such as ``"oracle"`` or
``"openai:Qwen/Qwen3-0.6B@http://localhost:8000/v1"``.
"""

from palaestra.agents.base import (
    Action,
    Agent,
    Conversation,
    acts_inline,
    agent_name,
    close_agent,
    next_action,
    resolve_action,
)
from palaestra.agents.simple import HumanAgent, LatencyAgent, OracleAgent, PolicyAgent, RandomAgent
from palaestra.agents.spec import make_agent

__all__ = [
    "Action",
    "Agent",
    "Conversation",
    "HumanAgent",
    "LatencyAgent",
    "OracleAgent",
    "PolicyAgent",
    "RandomAgent",
    "acts_inline",
    "agent_name",
    "close_agent",
    "make_agent",
    "next_action",
    "resolve_action",
]
