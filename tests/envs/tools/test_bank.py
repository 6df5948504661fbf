"""The bank domain: the oracle solves every level, each policy is enforced by the tools (a
refusal names the problem and changes nothing), and near-miss end states are rejected."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import pytest

import palaestra
from palaestra.envs.tools.backend import ToolTask, state_hash
from palaestra.envs.tools.bank import Bank
from palaestra.envs.tools.bank.database import (
    DAILY_LIMIT,
    DISPUTE_WINDOW_DAYS,
    Account,
    BankDB,
    Customer,
    accounts_of,
    card_last_four,
    sent_today,
)
from palaestra.envs.tools.env import snapshot

T = TypeVar("T")


def first(items: Iterable[T], what: str) -> T:
    for item in items:
        return item
    raise AssertionError(f"the seeded bank has no {what}")


# -- a bank backend, used directly ------------------------------------------------------------


@pytest.fixture
def bank() -> Bank:
    backend = Bank()
    backend.load(snapshot(Bank, 0))
    return backend


def use(bank: Bank, name: str, **arguments: Any) -> str:
    return {t.name: t for t in bank.tools()}[name].call(arguments)


def login(bank: Bank, customer: Customer) -> None:
    found = use(bank, "find_customer_id", full_name=customer.full_name, phone=customer.phone)
    assert found == customer.customer_id
    output = use(
        bank,
        "verify_identity",
        customer_id=customer.customer_id,
        date_of_birth=customer.date_of_birth.isoformat(),
    )
    assert output == f"customer {customer.customer_id} verified"


def refused(bank: Bank, name: str, expected: str, **arguments: Any) -> None:
    """The call is refused with ``expected`` in its error, and the database is unchanged."""
    before = state_hash(bank.db)
    output = use(bank, name, **arguments)
    assert output.startswith(f"error: {name}") and expected in output, output
    assert state_hash(bank.db) == before


def customers(db: BankDB, predicate: Callable[[list[Account]], bool]) -> Iterable[Customer]:
    """Customers whose accounts satisfy ``predicate``."""
    return (c for c in db.customers.values() if predicate(accounts_of(db, c.customer_id)))


def open_of(accounts: list[Account], kind: str | None = None) -> list[Account]:
    return [a for a in accounts if a.status == "open" and kind in (None, a.kind)]


def someone_elses_open_account(db: BankDB, customer: Customer) -> Account:
    return first(
        (
            a
            for a in db.accounts.values()
            if a.status == "open" and a.customer_id != customer.customer_id
        ),
        "open account",
    )


# -- identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_customer", {"customer_id": "C1000"}),
        ("list_accounts", {"customer_id": "C1000"}),
        ("list_transactions", {"account_id": "A1000"}),
        ("transfer_funds", {"from_account_id": "A1000", "to_account_id": "A1001", "amount": 5}),
        ("block_card", {"card_id": "CD1000", "reason": "lost"}),
        ("order_replacement_card", {"card_id": "CD1000"}),
        ("dispute_transaction", {"transaction_id": "A1000-001", "reason": "duplicate"}),
        ("open_account", {"customer_id": "C1000", "kind": "checking"}),
        ("close_account", {"account_id": "A1000"}),
        ("update_phone", {"customer_id": "C1000", "phone": "512-555-0000"}),
    ],
)
def test_nothing_is_read_or_changed_before_verification(bank, name, arguments):
    refused(bank, name, "verify the customer's identity first", **arguments)


def test_verification_needs_the_right_date_of_birth(bank):
    customer = bank.db.customers["C1000"]
    use(bank, "find_customer_id", full_name=customer.full_name, phone=customer.phone)
    wrong = (customer.date_of_birth + dt.timedelta(days=1)).isoformat()
    refused(bank, "verify_identity", "does not match", customer_id="C1000", date_of_birth=wrong)
    refused(bank, "get_customer", "verify the customer's identity first", customer_id="C1000")
    assert "date" in use(bank, "verify_identity", customer_id="C1000", date_of_birth="June 1st")
    login(bank, customer)
    profile = json.loads(use(bank, "get_customer", customer_id="C1000"))
    assert profile["customer_id"] == "C1000" and profile["phone"] == customer.phone


def test_verification_needs_a_lookup_first_and_locks_after_three_failures(bank):
    """A date of birth alone verifies nobody (no sweeping verify_identity over every id), and
    three failed checks lock verification for the conversation, even with the right data."""
    for customer in list(bank.db.customers.values())[:5]:
        refused(
            bank, "verify_identity", "find_customer_id first",
            customer_id=customer.customer_id, date_of_birth=customer.date_of_birth.isoformat(),
        )  # fmt: skip
    assert "customer_id" not in bank.session
    customer = bank.db.customers["C1001"]
    use(bank, "find_customer_id", full_name=customer.full_name, phone=customer.phone)
    for days in (1, 2, 3):
        wrong = (customer.date_of_birth + dt.timedelta(days=days)).isoformat()
        refused(bank, "verify_identity", "does not match", customer_id="C1001", date_of_birth=wrong)
    refused(
        bank, "verify_identity", "locked after 3 failed attempts",
        customer_id="C1001", date_of_birth=customer.date_of_birth.isoformat(),
    )  # fmt: skip
    refused(bank, "find_customer_id", "locked", full_name=customer.full_name, phone=customer.phone)
    bank.load(bank.db)  # a new conversation may try again
    login(bank, customer)


def test_find_customer_id_needs_name_and_phone(bank):
    customer = bank.db.customers["C1003"]
    digits = customer.phone.replace("-", "")
    spaced = f"({digits[:3]}) {digits[3:6]} {digits[6:]}"
    assert use(bank, "find_customer_id", full_name=customer.full_name.upper(), phone=spaced) == (
        "C1003"
    )
    other_phone = bank.db.customers["C1004"].phone
    refused(
        bank, "find_customer_id", "no customer", full_name=customer.full_name, phone=other_phone
    )
    assert "customer_id" not in bank.session  # finding is not verifying


def test_only_the_verified_customers_records(bank):
    db = bank.db
    customer = db.customers["C1000"]
    login(bank, customer)
    other = someone_elses_open_account(db, customer)
    other_card = first(
        (c for c in db.cards.values() if db.accounts[c.account_id].customer_id != "C1000"), "card"
    )
    other_charge = other.transactions[0]
    refused(bank, "get_customer", "not the verified customer", customer_id=other.customer_id)
    refused(bank, "list_accounts", "not the verified customer", customer_id=other.customer_id)
    refused(bank, "list_transactions", "belongs to another customer", account_id=other.account_id)
    refused(
        bank, "block_card", "belongs to another customer", card_id=other_card.card_id, reason="lost"
    )
    refused(
        bank, "transfer_funds", "belongs to another customer",
        from_account_id=other.account_id, to_account_id=accounts_of(db, "C1000")[0].account_id,
        amount=5,
    )  # fmt: skip
    refused(
        bank, "dispute_transaction", "no transaction",
        transaction_id=other_charge.transaction_id, reason="unauthorized",
    )  # fmt: skip
    refused(
        bank,
        "update_phone",
        "not the verified customer",
        customer_id=other.customer_id,
        phone="5125550000",
    )


# -- transfers --------------------------------------------------------------------------------


def _funded(bank: Bank) -> tuple[Account, Account]:
    """A verified customer's open checking account (over $100) and another open account."""
    customer = first(
        customers(
            bank.db,
            lambda accounts: (
                len(open_of(accounts)) >= 2
                and any(a.balance > 100 for a in open_of(accounts, "checking"))
            ),
        ),
        "customer with two open accounts",
    )
    login(bank, customer)
    accounts = open_of(accounts_of(bank.db, customer.customer_id))
    source = first((a for a in accounts if a.kind == "checking" and a.balance > 100), "checking")
    return source, first((a for a in accounts if a is not source), "second account")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("zero", "must be positive"),
        ("negative", "must be positive"),
        ("fraction of a cent", "whole cents"),
        ("more than the balance", "does not cover"),
        ("same account", "same account"),
        ("unknown destination", "no account"),
        ("closed destination", "is closed"),
        ("frozen destination", "is frozen"),
    ],
)
def test_transfer_policies(bank, case, expected):
    source, target = _funded(bank)
    amount = {"zero": 0, "negative": -5, "fraction of a cent": 10.005}.get(case, 10.0)
    destination = target.account_id
    if case == "more than the balance":
        amount = round(source.balance + 0.01, 2)
    elif case == "same account":
        destination = source.account_id
    elif case == "unknown destination":
        destination = "A9999"
    elif case in ("closed destination", "frozen destination"):
        status = case.split()[0]
        destination = first(
            (a.account_id for a in bank.db.accounts.values() if a.status == status), status
        )
    refused(
        bank, "transfer_funds", expected,
        from_account_id=source.account_id, to_account_id=destination, amount=amount,
    )  # fmt: skip


def test_frozen_and_closed_accounts_send_nothing(bank):
    for status in ("frozen", "closed"):
        account = first((a for a in bank.db.accounts.values() if a.status == status), status)
        login(bank, bank.db.customers[account.customer_id])
        destination = someone_elses_open_account(bank.db, bank.db.customers[account.customer_id])
        refused(
            bank, "transfer_funds", f"is {status}",
            from_account_id=account.account_id, to_account_id=destination.account_id, amount=1,
        )  # fmt: skip


def test_daily_limit_to_other_customers_counts_todays_transfers(bank):
    db = bank.db
    customer = first(
        customers(
            db,
            lambda accounts: (
                sent_today(db, accounts[0].customer_id) > 0
                and any(a.balance > DAILY_LIMIT for a in open_of(accounts, "checking"))
            ),
        ),
        "customer who sent money today and holds over the limit",
    )
    login(bank, customer)
    source = first(
        (a for a in open_of(accounts_of(db, customer.customer_id)) if a.balance > DAILY_LIMIT),
        "rich account",
    )
    payee = someone_elses_open_account(db, customer).account_id
    room = round(DAILY_LIMIT - sent_today(db, customer.customer_id), 2)
    refused(
        bank, "transfer_funds", "daily limit",
        from_account_id=source.account_id, to_account_id=payee, amount=round(room + 0.01, 2),
    )  # fmt: skip
    output = use(
        bank, "transfer_funds", from_account_id=source.account_id, to_account_id=payee, amount=room
    )
    assert output.startswith("transferred") and sent_today(db, customer.customer_id) == DAILY_LIMIT
    refused(
        bank, "transfer_funds", "daily limit",
        from_account_id=source.account_id, to_account_id=payee, amount=0.01,
    )  # fmt: skip


def test_own_transfers_have_no_limit_and_are_recorded_on_both_sides(bank):
    db = bank.db
    customer = first(
        customers(
            db,
            lambda accounts: (
                bool(open_of(accounts, "checking"))
                and any(a.balance > DAILY_LIMIT + 100 for a in open_of(accounts, "savings"))
            ),
        ),
        "customer with a rich savings account",
    )
    login(bank, customer)
    savings = open_of(accounts_of(db, customer.customer_id), "savings")[0]
    checking = open_of(accounts_of(db, customer.customer_id), "checking")[0]
    before = (savings.balance, checking.balance, len(savings.transactions))
    amount = DAILY_LIMIT + 50.25
    output = use(
        bank,
        "transfer_funds",
        from_account_id=savings.account_id,
        to_account_id=checking.account_id,
        amount=amount,
    )
    assert output.endswith(
        f"new balance of {savings.account_id}: ${before[0] - amount:,.2f}; "
        f"of {checking.account_id}: ${before[1] + amount:,.2f}"
    )  # both balances of the customer's own accounts
    assert savings.balance == round(before[0] - amount, 2)
    assert checking.balance == round(before[1] + amount, 2)
    out, into = savings.transactions[-1], checking.transactions[-1]
    assert (out.amount, out.counterparty, out.date) == (-amount, checking.account_id, db.today)
    assert (into.amount, into.counterparty, into.kind) == (amount, savings.account_id, "transfer")
    assert out.transaction_id == f"{savings.account_id}-{before[2] + 1:03d}"


# -- cards ------------------------------------------------------------------------------------


def test_card_policies(bank):
    db = bank.db
    blocked = first(
        (
            c
            for c in db.cards.values()
            if c.status == "blocked" and db.accounts[c.account_id].status == "open"
        ),
        "blocked card",
    )
    customer = db.customers[db.accounts[blocked.account_id].customer_id]
    login(bank, customer)
    refused(bank, "block_card", "already blocked", card_id=blocked.card_id, reason="lost")
    refused(bank, "block_card", "reason", card_id=blocked.card_id, reason="forgot the pin")
    replacement = json.loads(use(bank, "order_replacement_card", card_id=blocked.card_id))
    new_id = f"CD{1000 + len(db.cards) - 1}"
    digits = card_last_four(db, new_id)
    assert (replacement["card_id"], replacement["last_four"]) == (new_id, digits)
    assert db.cards[new_id].mailed_to == customer.address and db.cards[new_id].status == "active"
    assert blocked.replaced_by == new_id
    refused(bank, "order_replacement_card", "already replaced", card_id=blocked.card_id)
    refused(bank, "order_replacement_card", "block it first", card_id=new_id)


def test_no_replacement_for_a_card_of_a_frozen_account(bank):
    db = bank.db
    card = first(
        (c for c in db.cards.values() if db.accounts[c.account_id].status == "frozen"),
        "card of a frozen account",
    )
    login(bank, db.customers[db.accounts[card.account_id].customer_id])
    if card.status == "active":
        assert "blocked" in use(bank, "block_card", card_id=card.card_id, reason="damaged")
    refused(bank, "order_replacement_card", "is frozen", card_id=card.card_id)


# -- disputes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("transfer", "only card purchases"),
        ("deposit", "only card purchases"),
        ("too old", "days old"),
        ("already disputed", "already disputed"),
    ],
)
def test_dispute_policies(bank, case, expected):
    db = bank.db

    def fits(transaction) -> bool:
        age = (db.today - transaction.date).days
        if case == "too old":
            return transaction.kind == "card" and age > DISPUTE_WINDOW_DAYS
        if case == "already disputed":
            return transaction.disputed and age <= DISPUTE_WINDOW_DAYS
        return transaction.kind == case and age <= DISPUTE_WINDOW_DAYS

    account, transaction = first(
        ((a, t) for a in db.accounts.values() for t in a.transactions if fits(t)), case
    )
    login(bank, db.customers[account.customer_id])
    refused(
        bank, "dispute_transaction", expected,
        transaction_id=transaction.transaction_id, reason="unauthorized",
    )  # fmt: skip


def test_a_recent_card_purchase_is_disputed_once(bank):
    db = bank.db
    account, charge = first(
        (
            (a, t)
            for a in db.accounts.values()
            for t in a.transactions
            if t.kind == "card" and not t.disputed and (db.today - t.date).days <= 60
        ),
        "recent charge",
    )
    login(bank, db.customers[account.customer_id])
    output = use(
        bank, "dispute_transaction", transaction_id=charge.transaction_id, reason="duplicate"
    )
    assert output.startswith("dispute opened") and charge.disputed
    assert charge.dispute_reason == "duplicate"
    refused(
        bank, "dispute_transaction", "already disputed",
        transaction_id=charge.transaction_id, reason="duplicate",
    )  # fmt: skip


# -- accounts and contact details -------------------------------------------------------------


def test_at_most_one_savings_account(bank):
    db = bank.db
    holder = first(
        customers(db, lambda accounts: bool(open_of(accounts, "savings"))), "savings holder"
    )
    login(bank, holder)
    refused(
        bank,
        "open_account",
        "already holds a savings account",
        customer_id=holder.customer_id,
        kind="savings",
    )
    opened = use(bank, "open_account", customer_id=holder.customer_id, kind="checking")
    new_id = f"A{1000 + len(db.accounts) - 1}"
    assert json.loads(opened)["account_id"] == new_id and db.accounts[new_id].balance == 0.0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("money left", "move it out first"),
        ("last checking", "last open checking account"),
        ("frozen", "is frozen"),
        ("closed", "is closed"),
    ],
)
def test_close_account_policies(bank, case, expected):
    db = bank.db
    if case in ("frozen", "closed"):
        account = first((a for a in db.accounts.values() if a.status == case), case)
    elif case == "money left":
        account = first(
            (a for a in db.accounts.values() if a.status == "open" and a.balance > 0),
            "funded account",
        )
    else:
        customer = first(
            customers(db, lambda accounts: len(open_of(accounts, "checking")) == 1), "one checking"
        )
        account = open_of(accounts_of(db, customer.customer_id), "checking")[0]
        account.balance = 0.0  # only the last-checking rule stands in the way
    login(bank, db.customers[account.customer_id])
    refused(bank, "close_account", expected, account_id=account.account_id)


def test_closing_an_empty_checking_account_blocks_its_cards(bank):
    db = bank.db

    def fits(accounts: list[Account]) -> bool:
        checking = open_of(accounts, "checking")
        return len(checking) >= 2 and any(
            c.account_id == checking[0].account_id and c.status == "active"
            for c in db.cards.values()
        )

    customer = first(customers(db, fits), "customer with two checking accounts and a card")
    login(bank, customer)
    closing, keeping = open_of(accounts_of(db, customer.customer_id), "checking")[:2]
    moved = use(
        bank,
        "transfer_funds",
        from_account_id=closing.account_id,
        to_account_id=keeping.account_id,
        amount=closing.balance,
    )
    assert moved.startswith("transferred")
    assert use(bank, "close_account", account_id=closing.account_id).startswith("account")
    assert closing.status == "closed"
    cards = [c for c in db.cards.values() if c.account_id == closing.account_id]
    assert cards and all(c.status == "blocked" for c in cards)


def test_update_phone_needs_ten_digits(bank):
    customer = bank.db.customers["C1002"]
    login(bank, customer)
    refused(bank, "update_phone", "ten-digit", customer_id="C1002", phone="555-0199")
    assert use(bank, "update_phone", customer_id="C1002", phone="(206) 555 0199").endswith(
        "206-555-0199"
    )
    assert (
        use(bank, "find_customer_id", full_name=customer.full_name, phone="2065550199") == "C1002"
    )


# -- episodes ---------------------------------------------------------------------------------


def play(env, seed: int) -> float:
    observation, _ = env.reset(seed=seed)
    policy = env.oracle()
    while True:
        observation, reward, terminated, truncated, _ = env.step(policy(observation))
        if terminated or truncated:
            return reward


@pytest.mark.parametrize(
    ("env_id", "writes"),
    [
        (
            "tools:Bank-Easy-v0",
            {"transfer_funds", "block_card", "update_address", "update_phone", "open_account",
             "dispute_transaction"},
        ),
        (
            "tools:Bank-v0",
            {"block_card", "order_replacement_card", "update_address", "transfer_funds",
             "open_account", "close_account"},
        ),
        (
            "tools:Bank-Hard-v0",
            {"block_card", "dispute_transaction", "order_replacement_card", "transfer_funds",
             "close_account"},
        ),
    ],
)  # fmt: skip
@pytest.mark.slow  # the default run plays the oracle on fewer seeds (test_attacks.py)
def test_oracle_solves_100_seeded_episodes_of_every_kind(env_id, writes):
    env = palaestra.make(env_id)
    writing = {t.name for t in env.unwrapped.backend.tools() if t.writes}
    rewards, drawn, refused = [], set(), 0
    for seed in range(100):
        rewards.append(play(env, seed))
        task = env.unwrapped.task
        drawn |= {action.name for action in task.actions} & writing
        refused += not any(action.name in writing for action in task.actions)
    assert rewards == [1.0] * 100
    assert drawn == writes  # every kind of change is drawn
    assert refused >= 10  # and requests the policy refuses


def test_same_seed_same_database_and_task():
    assert state_hash(Bank.generate(np.random.default_rng(3))) == state_hash(
        Bank.generate(np.random.default_rng(3))
    )
    assert state_hash(Bank.generate(np.random.default_rng(3))) != state_hash(
        Bank.generate(np.random.default_rng(4))
    )
    a, b = palaestra.make("tools:Bank-v0"), palaestra.make("tools:Bank-v0")
    tasks = []
    for seed in range(10):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.unwrapped.task == b.unwrapped.task
        tasks.append(a.unwrapped.task.request)
    assert len(set(tasks)) >= 8


def test_hard_requests_hold_back_what_only_the_customer_knows():
    env = palaestra.make("tools:Bank-Hard-v0")
    for seed in range(30):
        request, _ = env.reset(seed=seed)
        task: ToolTask = env.unwrapped.task
        verify = task.actions[1].arguments
        customer = env.unwrapped.backend.db.customers[verify["customer_id"]]
        assert customer.full_name not in request and verify["date_of_birth"] not in request
        assert len(task.facts) >= 3 and not any(fact.text in request for fact in task.facts)
        topics = [topic for fact in task.facts for topic in fact.topics]
        assert len(topics) == len(set(topics))


# -- grading ----------------------------------------------------------------------------------


def seed_where(env, predicate: Callable[[Any], bool], limit: int = 300) -> int:
    for seed in range(limit):
        env.reset(seed=seed)
        if predicate(env.unwrapped):
            return seed
    raise AssertionError("no seed found")


def run_all(inner, actions) -> None:
    tools = {t.name: t for t in inner.backend.tools()}
    for action in actions:
        output = tools[action.name].call(action.arguments)
        assert not output.startswith("error"), output


def _spare_account(inner) -> Account | None:
    """Another open account of the task's customer that could pay the task's transfer."""
    transfer = inner.task.actions[-1].arguments
    db = inner.backend.db
    customer_id = inner.task.actions[1].arguments["customer_id"]
    return next(
        (
            a
            for a in open_of(accounts_of(db, customer_id))
            if a.account_id not in (transfer["from_account_id"], transfer["to_account_id"])
            and a.balance >= transfer["amount"]
        ),
        None,
    )


def _other_active_card(inner) -> str | None:
    db = inner.backend.db
    customer_id = inner.task.actions[1].arguments["customer_id"]
    blocked = inner.task.actions[-1].arguments["card_id"]
    owned = {a.account_id for a in accounts_of(db, customer_id)}
    return next(
        (
            c.card_id
            for c in db.cards.values()
            if c.account_id in owned and c.status == "active" and c.card_id != blocked
        ),
        None,
    )


def _talk_until_the_end(env, message: str):
    while True:
        result = env.step(message)
        if result[2] or result[3]:
            return result


@pytest.mark.parametrize(
    "mistake",
    ["none", "wrong source account", "a cent short", "extra blocked card", "wrong reason"],
)
def test_near_miss_states_are_rejected(mistake):
    env = palaestra.make("tools:Bank-Easy-v0")
    if mistake in ("wrong source account", "a cent short", "none"):
        seed_where(
            env,
            lambda inner: (
                inner.task.actions[-1].name == "transfer_funds"
                and _spare_account(inner) is not None
            ),
        )
    elif mistake == "extra blocked card":
        seed_where(
            env,
            lambda inner: (
                inner.task.actions[-1].name == "block_card"
                and _other_active_card(inner) is not None
            ),
        )
    else:
        seed_where(env, lambda inner: inner.task.actions[-1].name == "dispute_transaction")
    inner = env.unwrapped
    *identity, action = inner.task.actions
    run_all(inner, identity)
    arguments = dict(action.arguments)
    if mistake == "wrong source account":
        arguments["from_account_id"] = _spare_account(inner).account_id
    elif mistake == "a cent short":
        arguments["amount"] = round(arguments["amount"] - 0.01, 2)
    elif mistake == "wrong reason":
        arguments["reason"] = "duplicate" if arguments["reason"] != "duplicate" else "unauthorized"
    extra = _other_active_card(inner) if mistake == "extra blocked card" else None
    run_all(inner, [type(action)(action.name, arguments)])
    if extra:
        assert inner.progress().database_done  # the task itself is done ...
        run_all(inner, [type(action)("block_card", {"card_id": extra, "reason": "lost"})])
    if mistake == "none":
        assert inner.progress().database_done and inner.progress().rules_followed
        return
    assert not inner.progress().database_done and inner.mismatch()
    _, reward, terminated, *_ = _talk_until_the_end(env, "All done, anything else?")
    assert reward == 0.0 and terminated


def test_the_replacement_goes_to_the_new_address_only_when_updated_first():
    env = palaestra.make("tools:Bank-v0")
    seed_where(env, lambda inner: inner.task.actions[2].name == "update_address")
    inner = env.unwrapped
    verify, login_, readdress, block, replace = inner.task.actions
    run_all(inner, [verify, login_, block, replace, readdress])  # replacement mailed to the old one
    assert not inner.progress().database_done
    assert any("mailed_to" in path for path in inner.mismatch())


def test_the_outcome_must_be_told():
    """After the right calls, a bare "All done." ends the conversation (the user does not know
    what the grade needs) with reward 0: the new card's digits were not told. Told, they win."""
    env = palaestra.make("tools:Bank-v0")
    seed = seed_where(env, lambda inner: inner.task.actions[-1].name == "order_replacement_card")
    for report, won in (("All done.", 0.0), ("All done. Your new card ends in {digits}.", 1.0)):
        env.reset(seed=seed)
        inner = env.unwrapped
        run_all(inner, inner.task.actions)
        new_card = inner.backend.db.cards[f"CD{1000 + len(inner.backend.db.cards) - 1}"]
        assert [fact.value for fact in inner.task.report] == [new_card.last_four]
        observation, reward, terminated, *_ = env.step(report.format(digits=new_card.last_four))
        assert terminated and reward == won and observation.startswith("Thank you")
        untold = [problem for problem in inner.problems() if problem.startswith("not told")]
        assert bool(untold) == (won == 0.0)


@pytest.mark.parametrize(
    "action",
    [
        "",
        "\x00\ufffd" * 300,
        "<tool_call>{not json</tool_call>",
        '<tool_call>{"name": "rob_the_vault", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "transfer_funds", "arguments": {"amount": "lots"}}</tool_call>',
        '<tool_call>{"name": "verify_identity", "arguments": {"customer_id": 7, "date_of_birth": '
        '"x"}}</tool_call>',
        '<tool_call>{"name": "close_account", "arguments": ["A1000"]}</tool_call>',
        "x" * 100_000,
    ],
)
def test_garbage_actions_do_not_raise(action):
    env = palaestra.make("tools:Bank-Hard-v0")
    env.reset(seed=0)
    before = state_hash(env.unwrapped.backend.db)
    for _ in range(3):
        observation, reward, terminated, truncated, _ = env.step(action)
        assert isinstance(observation, str) and 0.0 <= reward <= 1.0
        if terminated or truncated:
            break
    assert state_hash(env.unwrapped.backend.db) == before
