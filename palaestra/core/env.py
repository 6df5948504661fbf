"""The `Env` base class: a gymnasium env whose observations and actions are strings."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from palaestra.core.spaces import TextSpace

Policy = Callable[[str], str]
"""A policy maps the latest observation to the next action (for oracles and simple agents)."""

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
ResetResult = tuple[str, dict[str, Any]]


class Env(gym.Env[str, str]):
    """Base class of every palaestra environment.

    Subclasses implement ``reset`` (calling ``super().reset(seed=seed)`` first) and ``step``,
    and draw randomness only from ``self.np_random`` so that the same seed gives the same
    episode under any concurrency.

    Conventions (``docs/writing-envs.md`` walks through them):

    * the first observation is the task;
    * bad actions (garbage, empty, enormous) never raise: they get an explanatory
      observation, a reward inside ``reward_range`` and count toward ``max_turns``;
    * ``info["role"]`` is ``"tool"`` for tool results, else ``"user"``;
      ``info["success"]`` is set when the episode ends; ``info["metrics"]`` holds floats.

    Example::

        env = palaestra.make("game:GuessTheNumber-v0")
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(r"\\boxed{25}")
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    observation_space = TextSpace()
    action_space = TextSpace()

    reward_range: tuple[float, float] = (0.0, 1.0)
    """Inclusive bounds of every per-step reward (also of garbage actions)."""

    max_turns: int | None = None
    """Most steps an episode can take before it ends (None: the env has no limit of its own)."""

    system_prompt: str | None = None
    """Instructions an agent should see before the first observation, if any."""

    problem_count: int | None = None
    """How many problems the env's task source holds (None: generated without end); dataset
    envs serve row ``i`` for ``reset(options={"index": i})``."""

    oracle_always_wins: bool = True
    """Whether the oracle wins every episode; False where chance can defeat the best policy
    (slippery ice): the contract checker then only asks that it beat random actions."""

    tool_format: str = "hermes"
    """Name of the tool-call format this env reads (:mod:`palaestra.core.tool_calls`)."""

    threaded_step: ClassVar[bool] = True
    """Whether ``areset``/``astep`` run the sync methods in a worker thread.

    Cheap pure-Python envs set this to False: their async twins then run inline, which
    avoids a thread hop per step. Envs that wait on I/O override ``areset``/``astep``.
    """

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; choose one of {self.metadata['render_modes']}"
            )
        self.render_mode = render_mode

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format function schemas of the tools this env accepts (empty by default)."""
        return []

    @property
    def steps_inline(self) -> bool:
        """Whether ``areset``/``astep`` would just call ``reset``/``step`` inline, so a caller
        in an event loop may call those directly (a coroutine less per call)."""
        return _steps_inline(type(self))

    @property
    def native_async(self) -> bool:
        """Whether ``areset``/``astep`` do async work of their own (I/O) instead of only
        calling ``reset``/``step``; when False, a host may call the sync methods on a thread
        of its choosing (the env server steps each session on its own thread)."""
        return _native_async(type(self))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        """Async twin of ``reset``."""
        if self.threaded_step:
            return await asyncio.to_thread(self.reset, seed=seed, options=options)
        return self.reset(seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        """Async twin of ``step``."""
        if self.threaded_step:
            return await asyncio.to_thread(self.step, action)
        return self.step(action)

    def oracle(self) -> Policy:
        """A policy that solves the current episode (call after ``reset``).

        Oracles may read the env's hidden state; they exist for tests, demos and SFT warm
        starts. Envs without one raise ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def random_action(self, rng: np.random.Generator) -> str:
        """A uniformly random *well-formed* action for the current state (a baseline agent).

        Draws from ``rng``, never from ``self.np_random``, so it does not perturb the episode.
        The default returns short random text, which most envs treat as a malformed action.
        """
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 "))
        return "".join(rng.choice(letters, size=int(rng.integers(0, 17))))

    def render(self) -> str | None:
        """Text rendering of the current state when ``render_mode == "ansi"``."""
        if self.render_mode == "ansi":
            return self.render_text()
        return None

    def render_text(self) -> str:
        """Human-readable view of the state; subclasses with a board override this."""
        return ""


@functools.cache
def _steps_inline(env_type: type[Env]) -> bool:
    return (
        not env_type.threaded_step and env_type.areset is Env.areset and env_type.astep is Env.astep
    )


@functools.cache
def _native_async(env_type: type[Env]) -> bool:
    return env_type.areset is not Env.areset or env_type.astep is not Env.astep
