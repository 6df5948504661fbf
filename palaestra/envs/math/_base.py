"""The shared shape of math envs: an answer env graded by the math verifier."""

from __future__ import annotations

from palaestra.envs.base import AnswerEnv, Grade
from palaestra.tasks import Problem
from palaestra.verifiers.math import default_verifier

SYSTEM_PROMPT = (
    "Solve the problem. Think step by step, then give only the final answer inside \\boxed{}, "
    "for example \\boxed{42}."
)


class MathEnv(AnswerEnv):
    """A math problem; reward 1 for a correct final answer (:meth:`score` in [0, 1]).

    Subclasses implement :meth:`~palaestra.envs.base.AnswerEnv.new_problem` and may override
    :meth:`score` (default: the math verifier against the reference answer).
    """

    system_prompt = SYSTEM_PROMPT

    def score(self, action: str, problem: Problem) -> float:
        """How good ``action`` is as an answer to ``problem``, in [0, 1]."""
        if problem.answer is None:
            raise NotImplementedError(f"{type(self).__name__} must override score()")
        return default_verifier()(action, str(problem.answer))

    def grade(self, action: str, problem: Problem) -> Grade:
        score = self.score(action, problem)
        solved = score >= 1.0
        return Grade(score, solved, "Correct." if solved else "That is not correct.")

    def final_feedback(self, grade: Grade, problem: Problem) -> str:
        if grade.solved or problem.answer is None:
            return grade.feedback
        return f"{grade.feedback} The expected answer was {problem.answer}."

    def retry_prompt(self, grade: Grade, attempts_left: int) -> str:
        plural = "attempt" if attempts_left == 1 else "attempts"
        example = self.format_answer("...")
        return (
            f"{grade.feedback} Check your work and try again ({attempts_left} {plural} left); "
            f"give the final answer as {example}."
        )

    def oracle_program(self) -> str | None:
        """The problem's ``data["program"]`` if its generator wrote one."""
        data = self.problem.data
        return data.get("program") if isinstance(data, dict) else None
