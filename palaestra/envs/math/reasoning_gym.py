"""Every reasoning-gym task as a palaestra env, graded by the task's own scorer.

``rg:<task>-v0`` is single-turn; ``rg:<task>-Retry-v0`` allows three attempts with feedback.
Items come by index from a reasoning-gym dataset (whose items are seeded per index); which
item a reset serves follows :func:`palaestra.tasks.row_for_reset`.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from palaestra.envs.math._base import MathEnv
from palaestra.tasks import Problem, row_for_reset
from palaestra.verifiers.extract import extract_answer

INSTALL_HINT = "rg:* envs need reasoning-gym; install it with `pip install 'palaestra[rg]'`"
MAX_CACHED_ENTRIES = 4096
GENERATION_LOCK = threading.Lock()
"""Serializes reasoning-gym item generation process-wide: some generators seed or read the
global ``random``/``numpy`` state (``pool_matrix``: ``np.random.seed(seed + idx)``;
``list_functions`` draws from it unseeded), so concurrent resets would get each other's draws."""


@contextlib.contextmanager
def _seeded_global_random(seed: tuple[int, ...]) -> Iterator[None]:
    """Under the generation lock: the global ``random``/``numpy`` states seeded from ``seed``,
    and restored afterwards (user code sees its own state unchanged)."""
    with GENERATION_LOCK:
        saved_random, saved_numpy = random.getstate(), np.random.get_state()
        random.seed(repr(seed))
        np.random.seed(np.random.SeedSequence(seed).generate_state(1)[0])
        try:
            yield
        finally:
            random.setstate(saved_random)
            np.random.set_state(saved_numpy)


RG_SYSTEM_PROMPT = (
    "Solve the task. Think step by step, then give only the final answer inside "
    "<answer></answer> tags, for example <answer>42</answer>."
)


class ReasoningGymEnv(MathEnv):
    """A reasoning-gym task; reward is reasoning-gym's ``score_answer`` in [0, 1].

    ``config`` goes to the task's config class (difficulty knobs such as ``min_terms``);
    ``dataset_seed`` and ``size`` define the pool of items that resets serve (some tasks
    build all items up front, so a larger pool costs start-up time).
    """

    system_prompt = RG_SYSTEM_PROMPT

    def __init__(
        self,
        task: str,
        *,
        config: dict[str, Any] | None = None,
        dataset_seed: int = 0,
        size: int = 5_000,
        max_attempts: int = 1,
        attempt_cost: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_attempts=max_attempts, attempt_cost=attempt_cost, render_mode=render_mode
        )
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.task_name = task
        self.config = dict(config or {})
        self.dataset_seed = dataset_seed
        self.size = size
        self._dataset: Any = None
        self._entries: dict[int, dict[str, Any]] = {}

    @property
    def dataset(self) -> Any:
        """The reasoning-gym dataset (built on first use)."""
        if self._dataset is None:
            try:
                import reasoning_gym
            except ImportError as exc:
                raise ImportError(INSTALL_HINT) from exc
            with _seeded_global_random((self.dataset_seed, self.size)):
                self._dataset = reasoning_gym.create_dataset(
                    self.task_name, seed=self.dataset_seed, size=self.size, **self.config
                )
        return self._dataset

    @property
    def problem_count(self) -> int:
        return self.size

    def new_problem(self, seed: int | None, options: dict[str, Any]) -> Problem:
        index = row_for_reset(self.size, seed, options, self.np_random)
        entry = self._entry(index)
        answer = entry.get("answer")
        question = f"{entry['question']}\n\nGive your final answer inside <answer></answer> tags."
        return Problem(question, None if answer is None else str(answer), id=str(index), data=entry)

    def _entry(self, index: int) -> dict[str, Any]:
        """Item ``index``, generated with the global random state seeded from the dataset seed
        and the index (so every item is reproducible), and memoized."""
        if index not in self._entries:
            if len(self._entries) >= MAX_CACHED_ENTRIES:
                self._entries.pop(next(iter(self._entries)))
            dataset = self.dataset
            with _seeded_global_random((self.dataset_seed, index)):
                self._entries[index] = dataset[index]
        return self._entries[index]

    def score(self, action: str, problem: Problem) -> float:
        answer = extract_answer(action, ("answer_tag", "boxed")) or action.strip()
        try:
            return float(self.dataset.score_answer(answer, problem.data))
        except Exception:  # a scorer that chokes on garbage is a wrong answer, not a crash
            return 0.0

    def format_answer(self, answer: str) -> str:
        return f"<answer>{answer}</answer>"
