"""The F1 reward does not pay for hedging: listing candidates scores no more than guessing one.

Candidates are what a hedging policy would list: the gold answer and wrong answers of the
same type (answers of other questions with the same relation: other people's birth years,
other cities, look-alike names), or for a comparison the two names compared.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from statistics import mean

import pytest

import palaestra
from palaestra.envs.search.questions import make_question
from palaestra.envs.search.world import build_world
from palaestra.verifiers import qa

SEPARATORS = (", ", " or ", " ", "\n", "; ")


@functools.cache
def answer_pools(world_seed: int, count: int = 3000) -> dict[tuple[str, str], list[str]]:
    """Answers of ``count`` questions by (kind, last relation): wrong answers of one type."""
    world = build_world(world_seed)
    pools: dict[tuple[str, str], set[str]] = defaultdict(set)
    for index in range(count):
        question = make_question(world, index)
        pools[(question.kind, question.chain[-1][1])].add(question.answers[0])
    return {key: sorted(answers) for key, answers in pools.items()}


def candidate_sets(world, size: int, *, look_alike: bool, questions: int = 400):
    """(gold answers, candidates) per question: the gold and ``size - 1`` wrong answers of
    its type (with ``look_alike``, one sharing a word with the gold when there is one)."""
    pools = answer_pools(world.seed)
    rng = random.Random(size)
    for index in range(questions):
        question = make_question(world, 10_000 + index)
        gold = question.answers[0]
        if question.kind == "comparison":
            if size != 2:
                continue
            wrong = [name for name, _, _ in question.chain if name != gold]
        else:
            others = [a for a in pools[(question.kind, question.chain[-1][1])] if a != gold]
            alike = [a for a in others if set(a.lower().split()) & set(gold.lower().split())]
            rng.shuffle(others)
            rng.shuffle(alike)
            wrong = list(dict.fromkeys(alike[: int(look_alike)] + others))[: size - 1]
        if len(wrong) == size - 1:
            candidates = [gold, *wrong]
            rng.shuffle(candidates)
            yield question.answers, candidates


@pytest.mark.parametrize("look_alike", [False, True])
@pytest.mark.parametrize("size", [2, 3, 5])
def test_listing_candidates_scores_no_more_than_guessing_one(world, size, look_alike):
    guesses, hedges = [], defaultdict(list)
    for golds, candidates in candidate_sets(world, size, look_alike=look_alike):
        guesses.append(mean(qa.hedge_proof_f1(c, golds) for c in candidates))
        for separator in SEPARATORS:
            hedges[separator].append(qa.hedge_proof_f1(separator.join(candidates), golds))
        shared = [w for w in golds[0].split() if all(w in c.split() for c in candidates)]
        hedges["the words they share"].append(qa.hedge_proof_f1(" ".join(shared), golds))
    assert len(guesses) > 250
    guess = mean(guesses)
    for separator, scores in hedges.items():
        assert mean(scores) <= guess, (separator, mean(scores), guess)


def test_squad_f1_would_pay_for_hedging(world):
    """Why the reward is not SQuAD's F1: there, listing two candidates beats a coin flip."""
    pairs = list(candidate_sets(world, 2, look_alike=False))
    guess = mean(mean(qa.token_f1(c, golds) for c in candidates) for golds, candidates in pairs)
    hedge = mean(qa.token_f1(", ".join(candidates), golds) for golds, candidates in pairs)
    assert hedge > guess + 0.1


def test_the_f1_env_pays_a_hedge_what_the_reward_says():
    env = palaestra.make("search:Synthetic-v0", metric="f1")
    env.reset(seed=1)
    gold = env.unwrapped.problem.answer[0]
    _, reward, terminated, _, info = env.step(f"<answer>{gold} or Brask</answer>")
    expected = qa.hedge_proof_f1(f"{gold} or Brask", gold)
    assert terminated and reward == expected < 0.6 and info["metrics"]["f1"] > reward
    env.reset(seed=1)
    _, reward, *_ = env.step(f"<answer>{gold}</answer>")
    assert reward == 1.0
