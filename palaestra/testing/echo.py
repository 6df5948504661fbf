"""A trivial env for load tests of hosts and servers: each step echoes the action back."""

from __future__ import annotations

from typing import Any

from palaestra.core.env import Env, ResetResult, StepResult


class EchoEnv(Env):
    """Observes ``"echo: <action>"``; reward is the action's length; never ends by itself
    (``max_turns`` steps at most, then truncated)."""

    threaded_step = False

    def __init__(self, max_turns: int = 1_000_000):
        super().__init__()
        self.max_turns = max_turns
        self._turn = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._turn = 0
        return f"echo env, seed {seed}", {}

    def step(self, action: str) -> StepResult:
        self._turn += 1
        truncated = self._turn >= self.max_turns
        info = {"truncation_reason": "turn_limit"} if truncated else {}
        return f"echo: {action}", float(len(action)), False, truncated, info
