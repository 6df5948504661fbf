"""Rollouts: the async engine, gymnasium-style vector envs, token-level conversation building."""

from palaestra.runner.rollout import DEFAULT_MAX_TURNS, Runner, RunStats
from palaestra.runner.tasks import Task, make_tasks
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder
from palaestra.runner.vector import AsyncVectorEnv, SyncVectorEnv

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AsyncVectorEnv",
    "ChatTokenizer",
    "RunStats",
    "Runner",
    "SyncVectorEnv",
    "Task",
    "TokenRecorder",
    "make_tasks",
]
