"""Word ladder: turn one five-letter word into another, one letter at a time, through words."""

from __future__ import annotations

import functools
from collections import defaultdict, deque
from typing import Any

import numpy as np

from palaestra.core.env import Policy, ResetResult, StepResult
from palaestra.envs.base import TurnBasedEnv, difficulty_preset
from palaestra.envs.games._common import left, parse_move
from palaestra.envs.games.wordle import word_list

PRESETS: dict[str, dict[str, int]] = {
    "easy": {"min_steps": 2, "max_steps": 3},
    "medium": {"min_steps": 4, "max_steps": 5},
    "hard": {"min_steps": 6, "max_steps": 8},
}
SYSTEM_PROMPT = (
    "You are playing Word Ladder. Think step by step, then give the next word inside "
    "\\boxed{}: a five-letter English word that differs from the current word in exactly one "
    "letter, for example \\boxed{crane} after crate."
)


@functools.cache
def word_graph() -> dict[str, tuple[str, ...]]:
    """Every accepted five-letter word and the words one letter away from it."""
    words = word_list("all")
    buckets: dict[str, list[str]] = defaultdict(list)
    for word in words:
        for i in range(len(word)):
            buckets[word[:i] + "_" + word[i + 1 :]].append(word)
    return {
        word: tuple(
            sorted(
                {n for i in range(len(word)) for n in buckets[word[:i] + "_" + word[i + 1 :]]}
                - {word}
            )
        )
        for word in words
    }


def distances_to(target: str) -> dict[str, int]:
    """Ladder length from every word that can reach ``target`` (BFS over :func:`word_graph`)."""
    graph = word_graph()
    distance = {target: 0}
    queue = deque([target])
    while queue:
        word = queue.popleft()
        for neighbour in graph[word]:
            if neighbour not in distance:
                distance[neighbour] = distance[word] + 1
                queue.append(neighbour)
    return distance


class WordLadder(TurnBasedEnv):
    """From a start word to a target word (both common five-letter words), changing one
    letter per move, every step an accepted English word; the shortest ladder is between
    ``min_steps`` and ``max_steps`` moves (recorded as ``optimal_steps``).

    Reward: 1 on reaching the target; 0 otherwise. A word that is not accepted, or that does
    not differ in exactly one letter, costs a move. ``max_turns`` defaults to twice the
    shortest ladder plus 2. ``shaping > 0`` adds a potential-based per-move reward for the
    decrease of the ladder distance to the target (over the start's), which sums to
    ``shaping`` over any win. The oracle walks a shortest ladder.
    """

    threaded_step = False
    system_prompt = SYSTEM_PROMPT

    def __init__(
        self,
        difficulty: str = "medium",
        *,
        max_turns: int | None = None,
        shaping: float = 0.0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.preset = difficulty_preset(PRESETS, difficulty)
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self._max_turns = max_turns
        self.shaping = shaping
        self.reward_range = (0.0, 1.0 + shaping)
        self.start_word = self.target = self.current = ""
        self.optimal_steps = 0
        self._distance: dict[str, int] = {}
        self.max_turns = max_turns or 2 * self.preset["max_steps"] + 2

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        common = word_list("common")
        low, high = self.preset["min_steps"], self.preset["max_steps"]
        while True:
            self.target = common[int(self.np_random.integers(len(common)))]
            self._distance = distances_to(self.target)
            starts = sorted(w for w in common if low <= self._distance.get(w, -1) <= high)
            if starts:
                self.start_word = starts[int(self.np_random.integers(len(starts)))]
                break
        self.current = self.start_word
        self.optimal_steps = self._distance[self.start_word]
        self.max_turns = self._max_turns or 2 * self.optimal_steps + 2
        self.start()
        task = (
            f"Change {self.start_word.upper()} into {self.target.upper()}, one letter per move; "
            f"every word on the way must be an English word. The shortest ladder takes "
            f"{self.optimal_steps} moves; you have {self.max_turns}. Give each next word inside "
            "\\boxed{}."
        )
        return task, {"role": "user"}

    def play(self, action: str) -> StepResult:
        word = (parse_move(action) or "").strip().lower()
        gain = 0.0
        graph = word_graph()
        if word not in graph:
            feedback = f"{word[:20].upper() or 'That'} is not a five-letter word I know."
        elif word not in graph[self.current]:
            feedback = (
                f"{word.upper()} does not differ from {self.current.upper()} in exactly one letter."
            )
        else:
            before, after = self._distance[self.current], self._distance[word]  # one component
            gain = self.shaping * (before - after) / self.optimal_steps if self.shaping else 0.0
            self.current = word
            if word == self.target:
                return self.finish(
                    f"{word.upper()}: you made it in {self.turn} moves.", 1.0 + gain, True
                )
            feedback = f"Now at {word.upper()}."
        if self.turns_left() == 0:
            return self.finish(f"{feedback} No moves left.", gain, False)
        return self.proceed(
            f"{feedback} Current word: {self.current.upper()}, target {self.target.upper()}; "
            f"{left(self.turns_left(), 'move')}",
            gain,
        )

    def oracle(self) -> Policy:
        """A neighbour one step closer to the target (the first in alphabetical order)."""

        def policy(observation: str) -> str:
            here = self._distance[self.current]
            step = next(w for w in word_graph()[self.current] if self._distance.get(w) == here - 1)
            return "\\boxed{" + step + "}"

        return policy

    def random_action(self, rng: np.random.Generator) -> str:
        options = word_graph()[self.current] or (self.current,)
        return "\\boxed{" + options[int(rng.integers(len(options)))] + "}"

    def render_text(self) -> str:
        return f"{self.start_word} -> {self.target}: at {self.current}, turn {self.turn}/{self.max_turns}"
