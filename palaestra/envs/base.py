"""Env bases the families share: turn bookkeeping, and answers graded over attempts.

* :class:`TurnBasedEnv` counts turns, ends the episode with success and metrics, and
  answers a step after the end; a game implements :meth:`TurnBasedEnv.play`.
* :class:`AnswerEnv` serves a problem, grades each answer and gives feedback between
  attempts (``max_attempts`` > 1 is the ``-Retry`` variant of every family, each attempt
  after the first costing ``attempt_cost``); a family implements
  :meth:`AnswerEnv.new_problem` and :meth:`AnswerEnv.grade`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.tasks import Problem

EPISODE_OVER = "The episode is over. Reset to start a new one."
RETRY_ATTEMPTS = 3
"""Attempts of the ``-Retry`` variants."""
RETRY_COST = 0.1
"""What each attempt after the first costs in the ``-Retry`` variants."""
RETRY = {"max_attempts": RETRY_ATTEMPTS, "attempt_cost": RETRY_COST}
"""Keyword arguments of a family's ``-Retry`` variant (its env passes ``attempt_cost`` on to
:class:`AnswerEnv`)."""


def difficulty_preset(presets: dict[str, dict[str, Any]], difficulty: str) -> dict[str, Any]:
    """The preset for ``difficulty``, with an error that lists the valid names."""
    try:
        return presets[difficulty]
    except KeyError:
        raise ValueError(
            f"unknown difficulty {difficulty!r}; choose one of {sorted(presets)}"
        ) from None


class TurnBasedEnv(Env):
    """Counts turns, ends the episode, answers steps after the end.

    Subclasses start an episode with :meth:`start` (from ``reset``) and implement
    :meth:`play`, one turn whose ``self.turn`` is already counted; it returns
    :meth:`proceed` or :meth:`finish`. ``info["metrics"]`` of the final step always holds
    ``turns``.
    """

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.turn = 0
        self.done = True

    def start(self) -> None:
        """Begin an episode (call from ``reset``)."""
        self.turn = 0
        self.done = False

    def step(self, action: str) -> StepResult:
        if self.done:
            return EPISODE_OVER, 0.0, True, False, {"role": "user"}
        self.turn += 1
        return self.play(action)

    def play(self, action: str) -> StepResult:
        """Play one turn."""
        raise NotImplementedError

    def turns_left(self) -> int:
        return (self.max_turns or 0) - self.turn

    def proceed(self, observation: str, reward: float = 0.0, **metrics: float) -> StepResult:
        """A step after which the episode goes on."""
        info: dict[str, Any] = {"role": "user"}
        if metrics:
            info["metrics"] = metrics
        return observation, reward, False, False, info

    def finish(
        self, observation: str, reward: float, success: bool, **metrics: float
    ) -> StepResult:
        """End the episode with ``reward``; ``info`` carries success and the metrics."""
        self.done = True
        info = {
            "role": "user",
            "success": success,
            "metrics": {"turns": float(self.turn), **metrics},
        }
        return observation, reward, True, False, info


@dataclass(frozen=True)
class Grade:
    """How good one answer is: ``score`` (in [0, 1], or the env's ``reward_range``), whether
    it ``solved`` the problem, ``feedback`` for the agent, and metrics to log."""

    score: float
    solved: bool
    feedback: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


class AnswerEnv(TurnBasedEnv):
    """A problem answered in one turn, or in up to ``max_attempts`` turns with feedback.

    Reward: the score of the final attempt minus ``attempt_cost`` for each attempt before
    it, clamped into ``reward_range`` (earlier attempts get 0), so a guess that needs the
    feedback is worth less than an answer right the first time: with the ``-Retry``
    variants' cost of 0.1, a solve on the third attempt earns 0.8. The episode ends on a
    solving answer or when the attempts run out. Subclasses implement :meth:`new_problem`
    and :meth:`grade`, and may override :meth:`retry_prompt`, :meth:`format_answer` and
    :meth:`oracle_program`.
    """

    def __init__(
        self, *, max_attempts: int = 1, attempt_cost: float = 0.0, render_mode: str | None = None
    ):
        super().__init__(render_mode=render_mode)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if not 0.0 <= attempt_cost <= 1.0:
            raise ValueError(f"attempt_cost must be in [0, 1], got {attempt_cost}")
        self.max_attempts = max_attempts
        self.attempt_cost = attempt_cost
        self.max_turns = max_attempts
        self._problem: Problem | None = None
        self._last_score = 0.0

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        """The problem of a reset (draw from ``self.np_random``, a task source, or ``options``)."""
        raise NotImplementedError

    def grade(self, action: str, problem: Problem) -> Grade:
        """Grade one answer."""
        raise NotImplementedError

    def retry_prompt(self, grade: Grade, attempts_left: int) -> str:
        """The observation after a wrong attempt when attempts are left."""
        plural = "attempt" if attempts_left == 1 else "attempts"
        return f"{grade.feedback}\nTry again ({attempts_left} {plural} left)."

    def final_feedback(self, grade: Grade, problem: Problem) -> str:
        """The observation that ends the episode."""
        return grade.feedback

    @property
    def problem(self) -> Problem:
        """The current problem."""
        if self._problem is None:
            raise RuntimeError(f"{type(self).__name__}: call reset() before using the problem")
        return self._problem

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        self._problem = self.new_problem(seed, dict(options or {}))
        self._last_score = 0.0
        self.start()
        info: dict[str, Any] = {"role": "user"}
        if self._problem.id is not None:
            info["problem_id"] = self._problem.id
        return self._problem.prompt, info

    def play(self, action: str) -> StepResult:
        problem = self.problem
        grade = self.grade(action, problem)
        low, high = self.reward_range
        cost = self.attempt_cost * (self.turn - 1)
        score = min(high, max(low, float(grade.score) - cost))
        self._last_score = score
        left = self.max_attempts - self.turn
        metrics = {"attempts": float(self.turn), "score": score, **grade.metrics}
        if grade.solved or left == 0:
            return self.finish(self.final_feedback(grade, problem), score, grade.solved, **metrics)
        return self.proceed(self.retry_prompt(grade, left), **metrics)

    def oracle(self) -> Policy:
        """Answers with the reference answer (problems without one have no oracle)."""
        answer = self.problem.answer
        if answer is None:
            raise NotImplementedError(f"this {type(self).__name__} problem has no reference answer")
        text = self.format_answer(str(answer))
        return lambda observation: text

    def format_answer(self, answer: str) -> str:
        """How a policy should write ``answer`` for this env."""
        return "\\boxed{" + answer + "}"

    def oracle_program(self) -> str | None:
        """A Python program that prints the answer (the oracle of the ``-Python`` variants
        runs it with the python tool, then answers with its output); None if there is none."""
        return None

    def render_text(self) -> str:
        if self._problem is None:
            return "(not reset)"
        return (
            f"{self._problem.prompt}\n-- attempt {self.turn}/{self.max_attempts}, "
            f"last score {self._last_score:.2f}"
        )
