"""Refusals are graded on substance: the right reason in its common paraphrases is recognised,
a reason that does not apply fails, and the reason counts only after the record that shows it
(or the tool's own refusal for it)."""

from __future__ import annotations

import pytest

import palaestra
from palaestra.envs.tools.backend import chunks
from palaestra.envs.tools.checks import Grounded
from palaestra.envs.tools.env import oracle_calls
from palaestra.envs.tools.facts import REASON, values
from tests.envs.tools.natural import PARAPHRASES

CONTEXT = {
    "shop": [
        "Your order #W1002 was delivered on May 3, so it's eligible for an exchange.",
        "I've looked up your order; it contains a blue kettle.",
        "Your refund will go to your original payment method.",
    ],
    "bank": [
        "I've verified your identity and looked at your checking account.",
        "Your balance is $1,234.00 and the charge was on 2024-03-01.",
        "I see your savings account ending 4411.",
    ],
    "clinic": [
        "I found your appointment with Dr. Alice Chen tomorrow.",
        "I've looked up your patient record; you were born in 1980.",
        "Dr. Paula Lindqvist has free times at 08:00 and 09:00.",
    ],
}
"""True statements of the records that name no reason (a refusal may include them)."""

IDS = {"shop": "tools:Shop-v0", "bank": "tools:Bank-v0", "clinic": "tools:Clinic-v0"}


def vocabulary(domain: str):
    return palaestra.make(IDS[domain]).unwrapped.backend_type.vocabulary


@pytest.mark.parametrize("domain", sorted(PARAPHRASES))
def test_the_right_reason_is_recognised_in_its_paraphrases(domain):
    reasons = vocabulary(domain).reasons
    for code, phrases in PARAPHRASES[domain].items():
        assert len(phrases) >= 30
        read = [values(f"I'm sorry, I can't do that: {p}.", vocabulary(domain)) for p in phrases]
        missed = [p for p, found in zip(phrases, read, strict=True) if found["reason"] != {code}]
        assert len(missed) <= 0.05 * len(phrases), (code, missed)
        assert code in reasons


@pytest.mark.parametrize("domain", sorted(CONTEXT))
def test_true_details_of_the_records_name_no_reason(domain):
    for sentence in CONTEXT[domain]:
        assert values(sentence, vocabulary(domain))["reason"] == set(), sentence


def refusals(env_id: str, count: int = 2):
    env, found = palaestra.make(env_id), 0
    for seed in range(80):
        env.reset(seed=seed)
        if any(f.kind == REASON for f in env.unwrapped.task.report):
            found += 1
            yield env, seed
            if found == count:
                return


def play(env, actions: list[str]) -> float:
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return reward
    return env.step("Is there anything else I can help you with?")[1]


def asked_and_read(env) -> list[str]:
    task = env.unwrapped.task
    asks = [f"Could you tell me your {', '.join(f.topics[0] for f in pair)}?"
            for pair in chunks(task.facts, 2)]  # fmt: skip
    calls = "\n".join(env.format.format(c, env.own_tools) for c in oracle_calls(task))
    return [*asks, calls]


@pytest.mark.parametrize("env_id", ["tools:Shop-v0", "tools:Bank-Hard-v0", "tools:Clinic-v0"])
def test_a_wrong_reason_fails_even_when_the_right_one_follows(env_id):
    for env, seed in refusals(env_id):
        task = env.unwrapped.task
        (why,) = [f for f in task.report if f.kind == REASON]
        reasons = env.unwrapped.backend_type.vocabulary.reasons
        wrong = [phrases[0] for code, phrases in reasons.items() if code != why.value]
        right = f"I'm sorry, I cannot do that: {why.text}."
        assert play(env, [*asked_and_read(env), right]) == 1.0, env.unwrapped.problems()
        env.reset(seed=seed)
        tries = [f"I'm sorry, I cannot do that: {phrase}." for phrase in wrong]
        assert play(env, [*asked_and_read(env), *tries, right]) == 0.0


@pytest.mark.parametrize("env_id", ["tools:Shop-v0", "tools:Bank-v0", "tools:Clinic-Hard-v0"])
def test_the_reason_counts_only_after_the_record_that_shows_it(env_id):
    """Said before the read, the right reason is not told; said again after it, it is. A
    refusal closes the conversation, so the early one says more is to come ("Let me
    double-check"); an early refusal that closes ends the episode with 0."""
    for env, seed in refusals(env_id):
        task = env.unwrapped.task
        (why,) = [f for f in task.report if f.kind == REASON]
        (grounded,) = [c for c in task.checks if isinstance(c, Grounded)]
        phrase = env.unwrapped.backend_type.vocabulary.reasons[why.value][0]
        refusal = f"I'm afraid I can't: {phrase}."
        early = f"{refusal} Let me double-check that."
        *asks, calls = asked_and_read(env)
        assert play(env, [*asks, early, calls, "Anything else?"]) == 0.0
        env.reset(seed=seed)
        assert play(env, [*asks, early, calls, refusal]) == 1.0, env.unwrapped.problems()
        env.reset(seed=seed)
        before_identity = env.format.format(grounded.attempt, env.own_tools)
        assert play(env, [before_identity, *asks, calls.split("\n")[0], refusal]) == 0.0
        env.reset(seed=seed)
        _, reward, terminated, *_ = env.step(refusal)
        assert terminated and reward == 0.0
