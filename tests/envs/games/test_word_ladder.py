"""Word ladder: the word graph, shortest-ladder oracle, rules, shaping."""

from __future__ import annotations

import numpy as np
import pytest

from palaestra.envs.games.word_ladder import WordLadder, distances_to, word_graph
from palaestra.testing import play


def test_graph_links_words_one_letter_apart():
    graph = word_graph()
    for word, neighbours in list(graph.items())[:300]:
        for other in neighbours:
            assert sum(a != b for a, b in zip(word, other, strict=True)) == 1
            assert word in graph[other]


@pytest.mark.parametrize(
    ("difficulty", "low", "high"), [("easy", 2, 3), ("medium", 4, 5), ("hard", 6, 8)]
)
def test_oracle_walks_a_shortest_ladder(difficulty, low, high):
    env = WordLadder(difficulty)
    for seed in range(100):
        transcript = play(env, seed)
        assert transcript[-1][5] is True
        assert low <= env.optimal_steps == len(transcript) - 1 <= high
        assert distances_to(env.target)[env.start_word] == env.optimal_steps


def test_bad_words_cost_a_move():
    env = WordLadder("easy", max_turns=4)
    env.reset(seed=2)
    far = next(
        w for w in word_graph() if sum(a != b for a, b in zip(w, env.current, strict=True)) > 1
    )
    for action, expected in [
        ("\\boxed{zzzzz}", "not a five-letter word"),
        (f"\\boxed{{{far}}}", "exactly one letter"),
        (f"\\boxed{{{env.current}}}", "exactly one letter"),
        ("\x00" * 3, "not a five-letter word"),
    ]:
        observation, reward, terminated, _, info = env.step(action)
        assert expected in observation and reward == 0.0
    assert terminated and info["success"] is False


def test_shaping_sums_to_its_weight_over_any_win():
    env = WordLadder("medium", shaping=0.5, max_turns=40)
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        total = sum(env.step(env.random_action(rng))[1] for _ in range(3))
        oracle, done = env.oracle(), env.current == env.target
        while not done:
            _, reward, done, *_ = env.step(oracle(""))
            total += reward
        assert total == pytest.approx(1.5)
