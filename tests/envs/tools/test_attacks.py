"""Scripted cheaters on every tool-use id: each wrong solution scores 0, each right one 1.

The attacks are agents that play through ``env.step`` and know the reference solution (the
strongest adversary): claims without actions, an extra write, a write one step off, writes in
the wrong order, facts left untold, dumps of candidate values, hedges among values shown,
made-up values, answers memorised from another seed, identity by date of birth alone, a
refund target guessed instead of asked, a questionnaire of every topic, slot ids and
transactions guessed from their pattern, orders changed unread, blind refusals. The right
solutions score 1: the oracle, the facts in other formats (``$11458.33`` for ``$11,458.33``,
``1:00 PM`` for ``13:00``), a refusal in other words.

Each test plays its attack on the first ``count`` seeds of an id where it applies (2 by
default, 8 in the slow run).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from decimal import Decimal

import pytest

import palaestra
from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import ToolTask, call, chunks
from palaestra.envs.tools.checks import Before, Grounded
from palaestra.envs.tools.env import DomainTools, oracle_calls
from palaestra.envs.tools.facts import (
    AMOUNT,
    DOCTOR,
    ID,
    REASON,
    TIME,
    Fact,
    Values,
    Vocabulary,
    amount_fact,
    judge,
    merge,
    shown,
    time_fact,
)

IDS = [f"tools:{domain}{level}-v0" for domain in ("Shop", "Bank", "Clinic")
       for level in ("-Easy", "", "-Hard")]  # fmt: skip
HARD = [env_id for env_id in IDS if "Hard" in env_id]
COUNTS = [2, pytest.param(8, marks=pytest.mark.slow)]
SEEDS = 60
"""Seeds searched for tasks an attack applies to."""

Script = Generator[str, str, None]


# -- playing -----------------------------------------------------------------------------------


def episodes(
    env_id: str, applies: Callable[[DomainTools], bool], count: int
) -> Iterator[tuple[DomainTools, int]]:
    """The env reset at each of the first ``count`` seeds whose task the attack ``applies``
    to, with the seed (to play the same episode again)."""
    env, found = palaestra.make(env_id), 0
    for seed in range(SEEDS):
        env.reset(seed=seed)
        if applies(env):
            found += 1
            yield env, seed
            if found == count:
                return
    assert found, f"no task of {env_id} in {SEEDS} seeds for this attack"


def anything(env: DomainTools) -> bool:
    return True


def score(env: DomainTools, script: Iterator[str]) -> float:
    """Play ``script`` (a generator receives each observation) to the end of the episode;
    once it has nothing more to say, it asks whether anything else is needed."""
    action = next(script)
    while True:
        observation, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return reward
        try:
            action = script.send(observation) if isinstance(script, Generator) else next(script)
        except StopIteration:
            script = iter(())
            action = "Is there anything else I can help you with?"


def task_of(env: DomainTools) -> ToolTask:
    return env.unwrapped.task


def act(env: DomainTools, calls: list[ToolCall]) -> str:
    return "\n".join(env.format.format(c, env.own_tools) for c in calls)


def questions(task: ToolTask) -> Iterator[str]:
    for pair in chunks(task.facts, 2):
        yield f"Could you tell me: {', '.join(f.topics[0] for f in pair)}?"


def told(facts: Iterable[Fact]) -> str:
    return " ".join(f"{fact.text}." for fact in facts)


def solve(
    env: DomainTools,
    *,
    ask: bool = True,
    calls: list[ToolCall] | None = None,
    message: str | None = None,
) -> Script:
    """The reference solution, or one changed: other ``calls``, another final ``message``."""
    task = task_of(env)
    if ask:
        yield from questions(task)
    calls = oracle_calls(task) if calls is None else calls
    for batch in chunks(calls, 16):
        yield act(env, list(batch))
    yield "All done. " + told(task.report) if message is None else message


def writes(env: DomainTools) -> set[str]:
    return {t.name for t in env.unwrapped.backend.tools() if t.writes}


def refused(env: DomainTools) -> bool:
    return any(fact.kind == REASON for fact in task_of(env).report)


def kinds(env: DomainTools) -> set[str]:
    return {fact.kind for fact in task_of(env).report}


# -- right solutions ---------------------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_the_oracle_wins(env_id, count):
    for env, _ in episodes(env_id, anything, 4 * count):
        assert score_oracle(env) == 1.0, env.unwrapped.problems()


def score_oracle(env: DomainTools) -> float:
    policy = env.oracle()
    observation = task_of(env).request

    def script() -> Script:
        nonlocal observation
        while True:
            observation = yield policy(observation)

    return score(env, script())


def other_format(fact: Fact, vocabulary: Vocabulary) -> str:
    """The fact as a person might write it: no thousands separators and no trailing zeros,
    12-hour times, ids and names in another case, a reason in other words."""
    if fact.kind == AMOUNT:
        return f"${Decimal(fact.value).normalize():f}"
    if fact.kind == TIME:
        hour, minute = (int(part) for part in fact.value.split(":"))
        return f"{(hour - 1) % 12 + 1}:{minute:02d} {'PM' if hour >= 12 else 'am'}"
    if fact.kind == ID:
        return fact.text.lower()
    if fact.kind == DOCTOR:
        return fact.value.upper()
    if fact.kind == REASON:
        return f"sorry, that is not possible: {vocabulary.reasons[fact.value][-1]}"
    return fact.text


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_facts_in_other_formats_count(env_id, count):
    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) & {AMOUNT, TIME, ID, DOCTOR, REASON})

    for env, _seed in episodes(env_id, applies, count):
        task = task_of(env)
        message = "Done: " + "; ".join(other_format(f, task.vocabulary) for f in task.report) + "."
        assert score(env, solve(env, message=message)) == 1.0, (message, env.unwrapped.problems())


def test_the_issues_formats_count():
    """``$11458.33`` for ``$11,458.33`` and ``1:00 PM`` for ``13:00`` (each rejected before)."""
    facts = (amount_fact(11458.33, "a balance"), time_fact("13:00", "a time"))
    verdict = judge("It is $11458.33, at 1:00 PM.", facts, {}, Vocabulary())
    assert verdict.told == set(facts) and not verdict.fabricated


# -- wrong solutions: the database ---------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_claims_without_actions_score_zero(env_id, count):
    """Every fact told (the reason of a refusal too), nothing done or looked up."""
    for env, _seed in episodes(env_id, anything, count):
        assert score(env, solve(env, calls=[])) == 0.0


EXTRA = {
    "shop": lambda s: call("modify_user_address", user_id=s["user_id"], street="1 Fake St",
                           city="Austin", state="TX", zip="78701"),
    "bank": lambda s: call("update_phone", customer_id=s["customer_id"], phone="512-555-0000"),
    "clinic": lambda s: call("update_phone", patient_id=s["patient_id"], phone="512-555-0000"),
}  # fmt: skip


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_an_extra_write_scores_zero(env_id, count):
    for env, _seed in episodes(env_id, anything, count):
        inner = env.unwrapped
        session = _session_after(env, _identify(task_of(env)))
        extra = EXTRA[inner.backend_type.name](session)
        assert score(env, solve(env, calls=[*oracle_calls(task_of(env)), extra])) == 0.0


def _identify(task: ToolTask) -> list[ToolCall]:
    """The reference calls that identify the customer."""
    return [c for c in task.actions if c.name.startswith(("find_", "verify_"))]


def _session_after(env: DomainTools, calls: list[ToolCall]) -> dict:
    """The session the identity ``calls`` open (on a scratch copy of the episode's backend)."""
    scratch = env.unwrapped.backend_type()
    scratch.load(env.unwrapped.backend.db)
    tools = {t.name: t for t in scratch.tools()}
    for c in calls:
        tools[c.name].call(c.arguments)
    return scratch.session


def _off_by_one(env: DomainTools) -> list[ToolCall] | None:
    """The reference calls with one write one step off: a cent less, the next slot, the other
    cancellation reason; None when no write has such an argument."""
    inner, calls = env.unwrapped, oracle_calls(task_of(env))
    for index, c in enumerate(calls):
        arguments = dict(c.arguments)
        if c.name == "transfer_funds" and arguments["amount"] > 0.01:
            arguments["amount"] = round(arguments["amount"] - 0.01, 2)
        elif c.name == "cancel_pending_order":
            other = {"no longer needed": "ordered by mistake"}
            arguments["reason"] = other.get(arguments["reason"], "no longer needed")
        elif c.name in ("book_appointment", "reschedule_appointment"):
            key = "slot_id" if c.name == "book_appointment" else "new_slot_id"
            slot = inner.backend.db.slots[arguments[key]]
            later = [s for s in inner.backend.db.free_slots(slot.doctor_id, slot.date)
                     if s.time > slot.time]  # fmt: skip
            if not later:
                continue
            arguments[key] = later[0].slot_id
        else:
            continue
        return [*calls[:index], ToolCall(c.name, arguments), *calls[index + 1 :]]
    return None


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_a_write_one_step_off_scores_zero(env_id, count):
    for env, _seed in episodes(env_id, lambda env: _off_by_one(env) is not None, count):
        assert score(env, solve(env, calls=_off_by_one(env))) == 0.0


def test_writes_in_the_wrong_order_score_zero():
    """Replacing a card before updating the address mails it to the old one."""

    def applies(env: DomainTools) -> bool:
        names = [c.name for c in task_of(env).actions]
        return "update_address" in names and "order_replacement_card" in names

    for env, _seed in episodes("tools:Bank-v0", applies, 2):
        identify, verify, readdress, block, replace = oracle_calls(task_of(env))
        wrong = [identify, verify, block, replace, readdress]
        assert score(env, solve(env, calls=wrong)) == 0.0


# -- wrong solutions: what is told ---------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_facts_left_untold_score_zero(env_id, count):
    """Nothing told, or every fact but one (a reschedule without the doctor's full name, a
    cancellation without the refund, a refusal without its reason)."""
    for env, seed in episodes(env_id, lambda env: bool(task_of(env).report), count):
        report = task_of(env).report
        assert score(env, solve(env, message="All done.")) == 0.0
        for missing in range(len(report)):
            rest = [fact for index, fact in enumerate(report) if index != missing]
            env.reset(seed=seed)
            assert score(env, solve(env, message="All done. " + told(rest))) == 0.0


def _candidates(env: DomainTools) -> list[str]:
    """Values of the report's kinds for a dump: 150 amounts around each amount, every
    half-hour, every doctor, ids and card endings in bulk, every reason."""
    inner, dump = env.unwrapped, []
    for fact in task_of(env).report:
        if fact.kind == AMOUNT:
            cents = int(Decimal(fact.value) * 100)
            dump += [f"${(cents + k) / 100:,.2f}" for k in range(-75, 75)]
        elif fact.kind == TIME:
            dump += [f"{h:02d}:{m:02d}" for h in range(8, 17) for m in (0, 30)]
        elif fact.kind == DOCTOR:
            dump += [d.name for d in inner.backend.db.doctors.values()]
        elif fact.kind == ID:
            dump += [f"A{n}" for n in range(1000, 1150)]
        elif fact.kind == REASON:
            dump += [
                p for phrases in inner.backend_type.vocabulary.reasons.values() for p in phrases
            ]
        else:
            dump += [f"{n:04d}" for n in range(0, 150)]
    return dump


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_dumps_of_candidates_score_zero(env_id, count):
    """The issue's dumps: every half-hour and doctor, 150 amounts, the right ones among them."""
    for env, _seed in episodes(env_id, lambda env: bool(task_of(env).report), count):
        dump = ", ".join(_candidates(env))
        message = f"All done. {told(task_of(env).report)} Or: {dump}"
        assert score(env, solve(env, message=message)) == 0.0


def _shop_reads(session: dict, task: ToolTask, inner) -> list[ToolCall]:
    orders = inner.backend.db.users[session["user_id"]].orders
    reads = [call("get_order_details", order_id=order) for order in orders]
    return [call("get_user_details", user_id=session["user_id"]), *reads]


def _bank_reads(session: dict, task: ToolTask, inner) -> list[ToolCall]:
    customer = session["customer_id"]
    accounts = [a for a in inner.backend.db.accounts.values() if a.customer_id == customer]
    reads = [call("list_transactions", account_id=a.account_id) for a in accounts]
    return [call("list_accounts", customer_id=customer), *reads]


def _clinic_reads(session: dict, task: ToolTask, inner) -> list[ToolCall]:
    days = {c.arguments["date"] for c in oracle_calls(task) if c.name == "find_available_slots"}
    slots = [
        call("find_available_slots", doctor_id=doctor, date=day)
        for doctor in inner.backend.db.doctors
        for day in sorted(days)
    ]
    return [call("list_doctors"), *slots]


READS = {"shop": _shop_reads, "bank": _bank_reads, "clinic": _clinic_reads}
"""Reads that show the agent many values of a domain (to list them all in a hedge)."""


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_hedges_among_values_shown_score_zero(env_id, count):
    """Read everything, then list every value of the facts' kinds that was shown."""

    def script(env: DomainTools) -> Script:
        task, inner = task_of(env), env.unwrapped
        yield from questions(task)
        reads = READS[inner.backend_type.name](_session_after(env, _identify(task)), task, inner)
        seen: Values = {}
        for batch in chunks([*oracle_calls(task), *reads], 16):
            merge(seen, shown((yield act(env, list(batch))), inner.backend_type.vocabulary))
        listed = sorted(
            f"${value}" if fact.kind == AMOUNT else value
            for fact in task.report
            for value in seen.get(fact.kind, set()) - {fact.value}
        )
        assert len(listed) > 3, "too few values shown to hedge among"
        yield f"All done. {told(task.report)} Or: {', '.join(listed)}"

    def applies(env: DomainTools) -> bool:
        return bool(kinds(env) & {AMOUNT, TIME, DOCTOR})

    for env, _seed in episodes(env_id, applies, count):
        assert score(env, script(env)) == 0.0


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_a_made_up_value_scores_zero(env_id, count):
    for env, _seed in episodes(env_id, anything, count):
        message = f"All done. {told(task_of(env).report)} You also get a $9,876.54 credit."
        assert score(env, solve(env, message=message)) == 0.0


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_blind_refusals_score_zero(env_id, count):
    """Refusing with every reason of the domain, nothing looked up."""
    for env, _seed in episodes(env_id, anything, count):
        reasons = env.unwrapped.backend_type.vocabulary.reasons.values()
        message = "I'm sorry, I cannot do that: " + "; ".join(p for ps in reasons for p in ps)
        assert score(env, solve(env, calls=[], message=message)) == 0.0


# -- wrong solutions: the task pool -------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_answers_memorised_from_another_seed_score_zero(env_id, count):
    """The reference solution of one seed, played on another (another database)."""
    for env, seed in episodes(env_id, anything, count):
        memorised = list(solve(env))
        env.reset(seed=seed + 1000)
        assert score(env, iter(memorised)) == 0.0


# -- wrong solutions: policy rules ---------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", [i for i in IDS if "Bank" in i])
def test_identity_by_date_of_birth_alone_scores_zero(env_id, count):
    """verify_identity on every customer id with the date of birth, no lookup first."""

    def applies(env: DomainTools) -> bool:
        return any(c.name in writes(env) for c in task_of(env).actions)

    for env, _seed in episodes(env_id, applies, count):
        task, db = task_of(env), env.unwrapped.backend.db
        birth = next(c for c in task.actions if c.name == "verify_identity")
        sweep = [call("verify_identity", customer_id=customer, date_of_birth=birth.arguments["date_of_birth"])
                 for customer in db.customers]  # fmt: skip
        rest = [c for c in oracle_calls(task) if not c.name.endswith(("customer_id", "identity"))]
        assert score(env, solve(env, calls=[*sweep, *rest])) == 0.0


def test_a_refund_target_guessed_scores_zero():
    """Shop-Hard returns: never asking where the refund goes, refunding to the original
    method (right in 53/60 tasks before) or to the reference target itself."""

    def applies(env: DomainTools) -> bool:
        return task_of(env).actions[-1].name == "return_delivered_order_items"

    for env, seed in episodes("tools:Shop-Hard-v0", applies, 4):
        task = task_of(env)
        asked = [f for f in task.facts if "refund" not in f.topics]
        ask = f"Could you tell me: {', '.join(f.topics[0] for f in asked)}?"
        for target in ("original", "reference"):
            env.reset(seed=seed)
            calls = oracle_calls(task)
            if target == "original":
                order = env.unwrapped.backend.db.orders[calls[-1].arguments["order_id"]]
                method = order.payments[0].payment_method_id
                calls[-1] = ToolCall(
                    calls[-1].name, {**calls[-1].arguments, "payment_method_id": method}
                )
            script = iter([ask, act(env, calls), "All done. " + told(task.report)])
            assert score(env, script) == 0.0, target


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", HARD)
def test_a_questionnaire_of_every_topic_scores_zero(env_id, count):
    """The issue's 218-character question of every topic (it got every hidden fact), then the
    reference calls: the user told nothing, so every call that needs a fact is a guess."""
    for env, _seed in episodes(env_id, anything, count):
        topics = ", ".join(group[0] for group in task_of(env).topics)
        questionnaire = f"Could you tell me: {topics}?"
        script = solve(env, ask=False)
        first = [questionnaire] * 3
        assert score(env, iter([*first, *script])) == 0.0


READ_FIRST = {
    "shop": "get_order_details",
    "bank": "list_transactions",
    "clinic": "find_available_slots",
}
"""The read a domain's policy wants before a write (a :class:`Before` check)."""


def _without(env: DomainTools, name: str) -> list[ToolCall] | None:
    """The reference calls without the reads a :class:`Before` check asks for, if any."""
    task = task_of(env)
    reads = [c.first for c in task.checks if isinstance(c, Before) and c.first.name == name]
    if not reads:
        return None
    return [c for c in oracle_calls(task) if c not in reads]


@pytest.mark.parametrize("env_id", [i for i in IDS if i != "tools:Bank-v0"])
def test_writes_on_records_not_read_score_zero(env_id):
    """Slots booked from a guessed id, disputes of transactions never listed, orders changed
    unread: the action checks fail them, even when the database ends right (Bank-v0 has no
    dispute)."""
    read = READ_FIRST[palaestra.make(env_id).unwrapped.backend_type.name]
    for env, _ in episodes(env_id, lambda env: _without(env, read) is not None, 2):
        assert score(env, solve(env, calls=_without(env, read))) == 0.0


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("env_id", IDS)
def test_a_refusal_needs_the_record_or_the_tools_refusal(env_id, count):
    """The right reason without looking anything up scores 0; after the read it scores 1,
    and after trying the refused call instead of the read, too."""
    for env, seed in episodes(env_id, refused, count):
        task = task_of(env)
        assert score(env, solve(env, calls=_identify(task))) == 0.0
        env.reset(seed=seed)
        assert score(env, solve(env)) == 1.0
        (grounded,) = [c for c in task.checks if isinstance(c, Grounded)]
        env.reset(seed=seed)
        attempt = _full_attempt(env, grounded.attempt)
        if attempt is not None:
            calls = [*(c for c in oracle_calls(task) if c != grounded.read), attempt]
            assert score(env, solve(env, calls=calls)) == 1.0, env.unwrapped.problems()


def _full_attempt(env: DomainTools, attempt: ToolCall) -> ToolCall | None:
    """The refused call a grounded refusal may try instead of reading, with every argument
    (None for those whose other arguments would have to be worked out)."""
    session = _session_after(env, _identify(task_of(env)))
    more = {
        "cancel_pending_order": {"reason": "no longer needed"},
        "dispute_transaction": {"reason": "unauthorized"},
        "open_account": {"customer_id": session.get("customer_id")},
        "cancel_appointment": {},
    }.get(attempt.name)
    return None if more is None else ToolCall(attempt.name, {**attempt.arguments, **more})


def test_a_waitlist_without_looking_at_the_day_scores_zero():
    """The patient wants a free time if there is one: the day is looked up first (a
    :class:`Required` check), even though the tool refuses to waitlist a day with free slots."""

    def applies(env: DomainTools) -> bool:
        return task_of(env).actions[-1].name == "join_waitlist"

    for env, seed in episodes("tools:Clinic-v0", applies, 2):
        assert score(env, solve(env, calls=list(task_of(env).actions))) == 0.0
        env.reset(seed=seed)
        assert score(env, solve(env)) == 1.0
