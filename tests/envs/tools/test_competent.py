"""A competent agent, written the way an LLM agent behaves, scores 1; the cheats that used
to pass score 0; always refusing wins the refusals only, and random play nothing.

The agent reasons in ``<think>`` blocks, asks in natural words (``natural.py``), looks the
records up, proposes a plan that names true details of them and asks to go ahead, acts, and
reports the facts in other formats, with values it works out (a balance's change, an
appointment's end) and a refusal's reason in its own words. Each id is played on 3 seeds
(60 in the slow run, where >= 97% must score 1).

Always refusing (ask, read, then refuse with the task's reason in other words, or a reason of
the domain when the task has none) wins exactly the refused requests; random play (the env's
random actions) wins nothing.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import palaestra
from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import chunks
from palaestra.envs.tools.env import DomainTools, oracle_calls
from palaestra.envs.tools.facts import (
    AMOUNT,
    DIGITS,
    ITEM,
    REASON,
    TIME,
    Fact,
    Vocabulary,
    values,
)
from tests.envs.tools.natural import PARAPHRASES, QUESTIONS, appointment_end
from tests.envs.tools.test_attacks import (
    IDS,
    Script,
    act,
    other_format,
    refused,
    score,
    task_of,
    writes,
)

SEEDS = [3, pytest.param(60, marks=pytest.mark.slow)]
OPENINGS = ("I'd be happy to help with that!", "Sure, I can help.", "Thanks for reaching out.")
REASONING = (
    "The customer wants something done. Per the policy I must identify them first, read the "
    "record, and only then act; I should not guess values. "
)
_BALANCE = re.compile(r'"balance":\s*(\d+(?:\.\d+)?)')


def competent(env: DomainTools, rng: random.Random) -> Script:
    """Ask, read, propose, act, report (see the module docstring)."""
    task, domain = task_of(env), env.unwrapped.backend_type.name
    heard = [task.request]
    for pair in chunks(task.facts, 2):
        asked = " ".join(rng.choice(QUESTIONS[domain][fact.topics[0]]) for fact in pair)
        heard.append((yield f"<think>{REASONING}</think>{rng.choice(OPENINGS)} {asked}"))
    calls, writing = oracle_calls(task), writes(env)
    first_write = next((i for i, c in enumerate(calls) if c.name in writing), len(calls))
    records = (yield act(env, calls[:first_write])) if first_write else ""
    if first_write < len(calls):
        yield plan(env, "\n".join([*heard, records]), calls[first_write:])
        records += yield act(env, calls[first_write:])
    yield report(env, records, rng)


def plan(env: DomainTools, heard: str, todo: list[ToolCall]) -> str:
    """A plan that names true details of the records and what will be done (with the
    arguments the conversation has shown), then asks to go ahead."""
    found = values(heard, env.unwrapped.backend_type.vocabulary)
    details = [f"I can see {value}" for kind in (ITEM, DIGITS) for value in sorted(found[kind])[:1]]
    steps = "; ".join(
        " ".join(
            [call.name.replace("_", " ")]
            + [f"{k.replace('_', ' ')} {v}" for k, v in call.arguments.items() if str(v) in heard]
        )
        for call in todo
    )
    thinking = f"<think>{REASONING * 3}</think>"
    return f"{thinking}Thanks! {''.join(d + '. ' for d in details)}Here's my plan: {steps}. Shall I go ahead?"


def report(env: DomainTools, records: str, rng: random.Random) -> str:
    """The facts in other formats, values worked out from them, a reason in other words, after
    reasoning long enough to push a report out of the graded window if it counted."""
    task, domain = task_of(env), env.unwrapped.backend_type.name
    vocabulary = env.unwrapped.backend_type.vocabulary
    told = [_told(fact, domain, vocabulary, rng) for fact in task.report]
    told += [d for fact in task.report if (d := _worked_out(fact, records))]
    thinking = f"<think>{REASONING * 12}Free times I saw: 08:00, 08:30, 10:00, 11:30.</think>"
    if any(fact.kind == REASON for fact in task.report):
        return f"{thinking}I'm sorry, I can't do that: {' '.join(told)}"
    return f"{thinking}All set! {' '.join(told)}"


def _told(fact: Fact, domain: str, vocabulary: Vocabulary, rng: random.Random) -> str:
    if fact.kind == REASON:
        return rng.choice(PARAPHRASES[domain][fact.value]) + "."
    return f"{fact.what.capitalize()}: {other_format(fact, vocabulary)}."


def _worked_out(fact: Fact, records: str) -> str | None:
    """A value derived from shown ones by the task's arithmetic: the change of a balance, the
    end of an appointment (slots are 30 minutes, as the policy says)."""
    if fact.kind == AMOUNT:
        before = [float(b) for b in _BALANCE.findall(records) if float(b) != float(fact.value)]
        if before:
            change = abs(before[0] - float(fact.value))
            return f"That is a change of ${change:,.2f} from the ${before[0]:,.2f} shown before."
    if fact.kind == TIME:
        return appointment_end(fact.value)
    return None


def share_won(env_id: str, seeds: int) -> tuple[float, list]:
    env, won, lost = palaestra.make(env_id), 0, []
    for seed in range(seeds):
        env.reset(seed=seed)
        if score(env, competent(env, random.Random(seed))) == 1.0:
            won += 1
        else:
            lost.append((seed, env.unwrapped.problems()))
    return won / seeds, lost


@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_a_competent_agent_wins(env_id, seeds):
    share, lost = share_won(env_id, seeds)
    assert share >= (0.97 if seeds >= 60 else 1.0), lost


def always_refuses(env: DomainTools, rng: random.Random) -> Script:
    """Ask, make the reads, then refuse: the task's reason in other words when it has one,
    else a reason of the domain."""
    task, domain = task_of(env), env.unwrapped.backend_type.name
    for pair in chunks(task.facts, 2):
        yield " ".join(rng.choice(QUESTIONS[domain][fact.topics[0]]) for fact in pair)
    reads = [c for c in oracle_calls(task) if c.name not in writes(env)]
    if reads:
        yield act(env, reads)
    why = [f.value for f in task.report if f.kind == REASON] or sorted(PARAPHRASES[domain])[:1]
    yield f"I'm sorry, I can't do that: {rng.choice(PARAPHRASES[domain][why[0]])}."


@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_always_refusing_wins_the_refusals_only(env_id, seeds):
    env = palaestra.make(env_id)
    for seed in range(seeds):
        env.reset(seed=seed)
        reward = score(env, always_refuses(env, random.Random(seed)))
        assert reward == float(refused(env)), (seed, env.unwrapped.problems())


@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_random_play_wins_nothing(env_id, seeds):
    env, rng = palaestra.make(env_id), np.random.default_rng(0)
    for seed in range(seeds):
        env.reset(seed=seed)
        while True:
            _, reward, terminated, truncated, _ = env.step(env.random_action(rng))
            if terminated or truncated:
                break
        assert reward == 0.0
