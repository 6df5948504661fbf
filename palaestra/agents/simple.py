"""Agents that need no model: oracle, random, a plain policy, a human, and a latency wrapper."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import numpy as np

from palaestra.agents.base import Action, Agent, Conversation, next_action
from palaestra.core.env import Policy


def _live_env(conversation: Conversation, agent: str):
    if conversation.env is None:
        raise RuntimeError(
            f"the {agent} agent reads the env's state, but this env runs in another process; "
            "run it in-process (no process pool), or on an env server (palaestra serve), "
            "which plays this agent from the env's own state"
        )
    return conversation.env


class OracleAgent:
    """Plays ``env.oracle()``: the env's own solver (for tests, demos and SFT data).

    ``env_policy`` names it to env hosts that play it next to the env (an env server).
    """

    name = "oracle"
    env_policy = "oracle"

    def act(self, conversation: Conversation) -> Action:
        policy = conversation.state.get("oracle")
        if policy is None:
            policy = conversation.state["oracle"] = _live_env(conversation, "oracle").oracle()
        return Action(policy(conversation.last_observation))


class RandomAgent:
    """Plays ``env.random_action(rng)``: a random well-formed move, drawn from the episode's rng.

    ``env_policy`` names it to env hosts that play it next to the env (an env server).
    """

    name = "random"
    env_policy = "random"

    def act(self, conversation: Conversation) -> Action:
        env = _live_env(conversation, "random")
        return Action(env.random_action(conversation.rng))


class PolicyAgent:
    """Wraps a plain ``Policy`` (latest observation -> action text).

    >>> agent = PolicyAgent(lambda obs: r"\\boxed{25}")
    """

    def __init__(self, policy: Policy, name: str = "policy"):
        self.policy = policy
        self.name = name

    def act(self, conversation: Conversation) -> Action:
        return Action(self.policy(conversation.last_observation))


class HumanAgent:
    """Asks a person at the terminal for each action (reads a line without blocking the loop)."""

    name = "human"

    def __init__(self, read_line: Callable[[str], str] = input):
        self.read_line = read_line

    async def act(self, conversation: Conversation) -> Action:
        prompt = f"\n{conversation.last_observation}\n> "
        return Action(await asyncio.to_thread(self.read_line, prompt))


class LatencyAgent:
    """Delays another agent by a lognormal time per call, like real generation does.

    ``median_s`` is the median delay and ``p99_s`` the 99th percentile; delays draw from the
    episode's rng, so runs are reproducible. Used by benchmarks and concurrency tests.
    """

    _Z99 = 2.3263478740408408  # standard normal 99th percentile

    def __init__(self, agent: Agent, median_s: float = 0.02, p99_s: float = 0.2):
        if not 0 < median_s <= p99_s:
            raise ValueError(f"need 0 < median_s <= p99_s, got {median_s} and {p99_s}")
        self.agent = agent
        self.mu = math.log(median_s)
        self.sigma = math.log(p99_s / median_s) / self._Z99
        self.name = f"{getattr(agent, 'name', type(agent).__name__)}+latency"

    def sample_delay(self, rng: np.random.Generator) -> float:
        """One delay in seconds."""
        return float(rng.lognormal(self.mu, self.sigma))

    async def act(self, conversation: Conversation) -> Action:
        await asyncio.sleep(self.sample_delay(conversation.rng))
        return await next_action(self.agent, conversation)
