"""Cheats that probe the grader or the user score 0: a refusal grounded by a call with missing
arguments made before identification or by a locked identity check, every reason of the domain
one a message, values offered as alternatives ("X or Y or Z"), and values tried one or three a
message while watching for the user's thanks. The user never sees the grade: its replies (text
and whether it ends the talk) are the same whether the database reached the reference state or
not, the rules were kept or not, and the report is right or wrong."""

from __future__ import annotations

from decimal import Decimal

import pytest

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.env import DomainTools, oracle_calls
from palaestra.envs.tools.facts import AMOUNT, DOCTOR, REASON, TIME, Fact, merge, shown
from palaestra.envs.tools.user import THANKS, YES
from tests.envs.tools.natural import PARAPHRASES, appointment_end
from tests.envs.tools.test_attacks import (
    IDS,
    READS,
    Script,
    _identify,
    _session_after,
    act,
    anything,
    episodes,
    kinds,
    other_format,
    questions,
    refused,
    score,
    task_of,
    told,
)


def _reason(env: DomainTools) -> str:
    (why,) = [f for f in task_of(env).report if f.kind == REASON]
    return PARAPHRASES[env.unwrapped.backend_type.name][why.value][0]


def _attempt(env: DomainTools) -> ToolCall:
    (grounded,) = [c for c in task_of(env).checks if hasattr(c, "attempt")]
    return grounded.attempt


@pytest.mark.parametrize("env_id", IDS)
def test_a_refusal_grounded_by_a_bare_call_before_identification_scores_zero(env_id):
    for env, _seed in episodes(env_id, refused, 2):
        task = task_of(env)
        bare = ToolCall(_attempt(env).name, {})
        script = iter([
            act(env, [bare]), *questions(task), act(env, _identify(task)),
            f"I'm sorry, I can't do that: {_reason(env)}.",
        ])  # fmt: skip
        assert score(env, script) == 0.0


@pytest.mark.parametrize("env_id", IDS)
def test_a_refusal_after_locking_identification_scores_zero(env_id):
    for env, _seed in episodes(env_id, refused, 2):
        task = task_of(env)
        wrong = [
            ToolCall(c.name, {k: f"x{v}" for k, v in c.arguments.items()})
            for c in _identify(task)[:1]
        ]
        script = iter([
            *questions(task), act(env, wrong * 4), act(env, [_attempt(env)]),
            f"I'm sorry, I can't do that: {_reason(env)}.",
        ])  # fmt: skip
        assert score(env, script) == 0.0


def _alternatives(env: DomainTools, count: int, joiner: str) -> Script:
    """Read everything, then offer a fact's value among others shown, ``count`` values in all,
    three a message, the right one last: "X or Y or Z" or "X, Y and Z" (one message), or "X,
    Y, Z" three times (the first message's closing ends the talk)."""
    task, inner = task_of(env), env.unwrapped
    yield from questions(task)
    reads = READS[inner.backend_type.name](_session_after(env, _identify(task)), task, inner)
    seen: dict = {}
    for call in [*oracle_calls(task), *reads]:
        merge(seen, shown((yield act(env, [call])), inner.backend_type.vocabulary))
    (fact,) = [f for f in task.report if f.kind in (AMOUNT, TIME, DOCTOR)][:1]
    others = sorted(seen.get(fact.kind, set()) - {fact.value})[: count - 1]
    assert len(others) == count - 1, "too few values shown"
    offers = [other_format(Fact(fact.kind, v, v), task.vocabulary) for v in others]
    offers.append(other_format(fact, task.vocabulary))
    rest = " ".join(f"{f.text}." for f in task.report if f != fact)
    for start in range(0, len(offers), 3):
        yield f"All done. It is {joiner.join(offers[start : start + 3])}. {rest}"


@pytest.mark.parametrize(("count", "joiner"), [(3, " or "), (3, ", "), (9, ", ")])
@pytest.mark.parametrize("env_id", IDS)
def test_values_offered_as_alternatives_or_tried_in_turn_score_zero(env_id, count, joiner):
    """One message of "X or Y or Z" or of a bare list "X, Y, Z", and nine values three a
    message."""

    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) & {AMOUNT, TIME, DOCTOR})

    for env, _seed in episodes(env_id, applies, 2):
        assert score(env, _alternatives(env, count, joiner)) == 0.0, env.unwrapped.problems()


@pytest.mark.parametrize("env_id", ["tools:Clinic-v0", "tools:Bank-Hard-v0"])
def test_the_users_yes_does_not_single_out_the_reference(env_id):
    """Every value the records showed gets the same "yes": proposing them in turn finds
    nothing out."""

    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) & {AMOUNT, TIME})

    for env, _seed in episodes(env_id, applies, 2):
        task, inner = task_of(env), env.unwrapped
        for question in questions(task):
            env.step(question)
        seen: dict = {}
        for call in oracle_calls(task):
            merge(seen, shown(env.step(act(env, [call]))[0], inner.backend_type.vocabulary))
        (fact,) = [f for f in task.report if f.kind in (AMOUNT, TIME)][:1]
        others = [Fact(fact.kind, v, v) for v in sorted(seen[fact.kind] - {fact.value})[:4]]
        replies = {
            inner.user.respond(
                f"Shall I make it {other_format(f, task.vocabulary)}?", inner.seen()
            ).text
            for f in [*others, fact]
        }
        assert replies == {YES}


def replies(
    env: DomainTools, seed: int, actions: list[str]
) -> tuple[list[tuple[str, bool]], float]:
    """Play ``actions`` on ``seed``: the user's replies (text, whether they end the talk), and
    the reward."""
    env.reset(seed=seed)
    said, reward = [], 0.0
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        if info["role"] == "user":
            said.append((observation, terminated))
        if terminated or truncated:
            break
    return said, reward


@pytest.mark.parametrize("env_id", IDS)
def test_replies_do_not_depend_on_the_outcome(env_id):
    """The same messages get the same replies whether the calls were right, missing, or made
    before the user told what they need, and whether the report is true or nothing was told:
    the user thanks and ends the talk on the closing in every case, and the grade differs."""
    for env, seed in episodes(env_id, anything, 2):
        task = task_of(env)
        asked, calls = list(questions(task)), act(env, oracle_calls(task))
        report = f"All done. {told(task.report)}"
        right, right_reward = replies(env, seed, [*asked, calls, report])
        assert right_reward == 1.0, env.unwrapped.problems()
        variants = {
            "nothing done": [*asked, report],
            "guessed": [calls, *asked, report],
            "nothing told": [*asked, calls, "All done."],
        }
        for name, actions in variants.items():
            said, reward = replies(env, seed, actions)
            assert said == right, name
            fails = {
                "nothing done": True,
                "guessed": any(f.needed_by for f in task.facts),
                "nothing told": bool(task.report),
            }
            if fails[name]:
                assert reward == 0.0, name
        assert right[-1] == (THANKS, True)


def _read_everything(env: DomainTools) -> Script:
    """Ask, then make the reference calls and reads that show many values of each kind."""
    task, inner = task_of(env), env.unwrapped
    yield from questions(task)
    reads = READS[inner.backend_type.name](_session_after(env, _identify(task)), task, inner)
    for call in [*oracle_calls(task), *reads]:
        yield act(env, [call])


def _candidates(env: DomainTools, count: int) -> tuple[Fact, list[str]]:
    """A fact of a kind with several values shown, and ``count`` values of that kind the
    reads showed, the fact's own first (in the format a person writes)."""
    task, inner = task_of(env), env.unwrapped
    seen: dict = {}
    for output in inner.backend.outputs:
        merge(seen, shown(output, inner.backend_type.vocabulary))
    (fact,) = [f for f in task.report if f.kind in (AMOUNT, TIME, DOCTOR)][:1]
    others = sorted(seen.get(fact.kind, set()) - {fact.value})[: count - 1]
    assert len(others) == count - 1, "too few values shown"
    offers = [other_format(fact, task.vocabulary)]
    offers += [other_format(Fact(fact.kind, v, v), task.vocabulary) for v in others]
    return fact, offers


ORDERS = {"right first": 0, "right second": 1, "right third": 2, "right fifth": 4, "right last": 8}
"""Where the right value comes among nine candidates tried one a message."""


@pytest.mark.parametrize("closing", ["All done. ", ""])
@pytest.mark.parametrize("env_id", IDS)
def test_values_tried_one_a_message_watching_for_thanks_score_zero(env_id, closing):
    """Read everything, then state a fact's value one candidate a message (with a closing, or
    without one), stopping at the user's thanks. The replies are the same whichever candidate
    is right, so nothing singles it out: with a closing the first message ends the talk (the
    first guess is graded), without one the user runs out of patience; a right value tried
    after a wrong one scores 0, second, third, fifth or last (a fact is told with one value)."""

    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) & {AMOUNT, TIME, DOCTOR})

    for env, seed in episodes(env_id, applies, 2):
        task, reading = task_of(env), list(_read_everything(env))
        replies(env, seed, reading)
        fact, offers = _candidates(env, 9)
        rest = " ".join(f"{f.text}." for f in task.report if f != fact)
        heard = {}
        for order, place in ORDERS.items():
            tried = [*offers[1 : place + 1], offers[0], *offers[place + 1 :]]
            said, reward = replies(
                env, seed, [*reading, *(f"{closing}It is {offer}. {rest}" for offer in tried)]
            )
            heard[order] = said[len(list(questions(task))) :]
            if order != "right first":
                assert reward == 0.0, (order, env.unwrapped.problems())
        assert all(heard[order] == heard["right first"] for order in ORDERS)
        assert all("thank" not in text.lower() for text, _ in heard["right last"][:-1])


def _worked_out(fact: Fact, seen: dict) -> str | None:
    """A message with values worked out from ``fact`` and not the fact itself: the change from
    the largest other amount shown and that amount, or the appointment's end."""
    if fact.kind == AMOUNT and Decimal(fact.value):
        before = max(
            (Decimal(a) for a in seen[AMOUNT] if a != fact.value and Decimal(a) > 1), default=None
        )
        if before is not None:
            change = abs(before - Decimal(fact.value))
            return f"That is a change of ${change:,.2f} from the ${before:,.2f} before."
    if fact.kind == TIME:
        return appointment_end(fact.value)
    return None


@pytest.mark.parametrize("env_id", IDS)
def test_a_fact_told_again_with_values_worked_out_from_it_scores_one(env_id):
    """The one value of each fact, told, then values worked out from it in a message of their
    own (a balance's change and the balance before, an appointment's end), then told again with
    a closing: nothing competes with the facts."""

    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) - {REASON})

    for env, seed in episodes(env_id, applies, 3):
        task, inner = task_of(env), env.unwrapped
        asked, calls = list(questions(task)), act(env, oracle_calls(task))
        _, reward = replies(env, seed, [*asked, calls])
        seen: dict = {}
        for output in inner.backend.outputs:
            merge(seen, shown(output, inner.backend_type.vocabulary))
        worked_out = " ".join(w for f in task.report if (w := _worked_out(f, seen)))
        script = [*asked, calls, told(task.report), worked_out or "Anything else?"]
        _, reward = replies(env, seed, [*script, f"All done. {told(task.report)}"])
        assert reward == 1.0, (worked_out, inner.problems())
