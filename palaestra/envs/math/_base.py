"""The shared shape of math envs: one question, graded answers, optional retries with feedback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.verifiers.math import default_verifier

SYSTEM_PROMPT = (
    "Solve the problem. Think step by step, then give only the final answer inside \\boxed{}, "
    "for example \\boxed{42}."
)


@dataclass(frozen=True)
class MathTask:
    """One problem: the question shown to the agent and its reference answer (None if the
    task has no single answer and is checked by a scorer instead)."""

    question: str
    answer: str | None
    data: Any = None


class MathTaskEnv(Env):
    """A question answered in one turn, or up to ``max_attempts`` turns with feedback.

    Subclasses implement :meth:`new_task` (draw from ``self.np_random`` or ``options``) and
    may override :meth:`score` (default: the math verifier against the reference answer).
    Reward: the score of the final attempt (1 when correct; earlier wrong attempts get 0).
    """

    system_prompt = SYSTEM_PROMPT

    def __init__(self, *, max_attempts: int = 1, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.max_attempts = max_attempts
        self.max_turns = max_attempts
        self._task: MathTask | None = None
        self._attempts = 0
        self._done = False
        self._last_score = 0.0

    def new_task(self, options: dict[str, Any]) -> MathTask:
        """Draw the next problem."""
        raise NotImplementedError

    def score(self, action: str, task: MathTask) -> float:
        """How good ``action`` is as an answer to ``task``, in [0, 1]."""
        if task.answer is None:
            raise NotImplementedError(f"{type(self).__name__} must override score()")
        return default_verifier()(action, task.answer)

    @property
    def task(self) -> MathTask:
        if self._task is None:
            raise RuntimeError(f"{type(self).__name__}: call reset() before using the task")
        return self._task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._task = self.new_task(dict(options or {}))
        self._attempts = 0
        self._done = False
        self._last_score = 0.0
        return self._task.question, {"role": "user"}

    def step(self, action: str) -> StepResult:
        if self._done:
            return (
                "The episode is over. Reset to get a new problem.",
                0.0,
                True,
                False,
                {"role": "user"},
            )
        task = self.task
        self._attempts += 1
        value = min(1.0, max(0.0, float(self.score(action, task))))
        self._last_score = value
        solved = value >= 1.0
        left = self.max_attempts - self._attempts
        if solved or left == 0:
            self._done = True
            if solved:
                observation = "Correct."
            else:
                observation = "That is not correct."
                if task.answer is not None:
                    observation += f" The expected answer was {task.answer}."
            info = {
                "role": "user",
                "success": solved,
                "metrics": {"attempts": float(self._attempts), "score": value},
            }
            return observation, value, True, False, info
        plural = "attempt" if left == 1 else "attempts"
        observation = (
            f"That is not correct. Check your work and try again ({left} {plural} left); "
            "give the final answer inside \\boxed{}."
        )
        return observation, 0.0, False, False, {"role": "user"}

    def oracle(self) -> Policy:
        """Answers with the reference answer (tasks without one have no oracle)."""
        answer = self.task.answer
        if answer is None:
            raise NotImplementedError(f"this {type(self).__name__} task has no reference answer")
        return lambda observation: self.format_answer(answer)

    def format_answer(self, answer: str) -> str:
        """How a policy should write ``answer`` for this env."""
        return "\\boxed{" + answer + "}"

    def render_text(self) -> str:
        if self._task is None:
            return "(not reset)"
        return (
            f"{self._task.question}\n-- attempt {self._attempts}/{self.max_attempts}, "
            f"last score {self._last_score:.2f}"
        )
