"""Rollouts: scheduling, playing an episode, env hosts, vector envs, token-level recording."""

from palaestra.runner.episode import DEFAULT_MAX_TURNS, EpisodePlayer
from palaestra.runner.hosts import EnvHandle, EnvHost, LocalEnvHost
from palaestra.runner.rollout import Runner, RunStats
from palaestra.runner.tasks import Task, make_tasks
from palaestra.runner.tokens import ChatTokenizer, TokenRecorder
from palaestra.runner.vector import AsyncVectorEnv, SyncVectorEnv

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AsyncVectorEnv",
    "ChatTokenizer",
    "EnvHandle",
    "EnvHost",
    "EpisodePlayer",
    "LocalEnvHost",
    "RunStats",
    "Runner",
    "SyncVectorEnv",
    "Task",
    "TokenRecorder",
    "make_tasks",
]
