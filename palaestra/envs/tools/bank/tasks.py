"""Bank tasks at three levels: one action, several dependent actions, and requests that need
what only the customer knows (identity, which card, which charge, how much, to whom). Each
level has requests the policy refuses (over the daily limit, a purchase too old to dispute, a
second savings account): the right end state is the database unchanged, and the customer must
be told why."""

from __future__ import annotations

import numpy as np

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import (
    Template,
    ToolTask,
    UserFact,
    call,
    draw_task,
    money,
    pick,
    refusal,
)
from palaestra.envs.tools.bank.database import (
    AREA_CODES,
    DAILY_LIMIT,
    DISPUTE_WINDOW_DAYS,
    Account,
    BankDB,
    Card,
    Customer,
    Transaction,
    accounts_of,
    next_account_id,
    sent_today,
)
from palaestra.envs.tools.facts import Vocabulary, amount_fact, reason_fact
from palaestra.envs.tools.people import random_address

BLOCK_REASONS = {"lost": "I lost it", "stolen": "it was stolen", "damaged": "it is damaged"}
DISPUTE_REASONS = {
    "unauthorized": "I never made that purchase",
    "duplicate": "I was charged twice for the same purchase",
    "not received": "I paid but never received what I ordered",
}

NAME_PHONE = ("full name", "name", "phone", "who am i speaking", "reach you")
BIRTH = ("date of birth", "birth", "born", "dob", "birthday", "birthdate")
CHARGE = (
    "which charge", "which transaction", "what charge", "what transaction", "which purchase",
    "what purchase", "describe the purchase", "charge for", "which payment", "what payment",
)  # fmt: skip
REASON = ("reason", "why", "what happened", "what's wrong", "what went wrong", "the problem")
CARD = ("which card", "what card", "card ending", "last four", "last 4", "which of your cards")
AMOUNT = ("how much", "amount", "the sum")
DESTINATION = (
    "which account", "account number", "recipient", "destination", "their account", "friend's",
    "where should", "where would", "where do you want", "send it to", "to whom", "payee",
)  # fmt: skip
TOPICS = (NAME_PHONE, BIRTH, CHARGE, REASON, CARD, AMOUNT, DESTINATION)
"""Every group of words a bank customer's facts are asked by."""
OVER_LIMIT, TOO_OLD, SAVINGS_HELD = "daily limit", "dispute window", "one savings account"
VOCABULARY = Vocabulary(
    reasons={
        OVER_LIMIT: (
            "daily", "per day", "a day", "each day", "in one day", "today's limit",
            "today's transfer limit", "limit for today", "limit for the day", "day's limit",
            "remaining limit", "transfer limit", "sending limit", "limit on transfers",
        ),
        TOO_OLD: (
            f"{DISPUTE_WINDOW_DAYS} days", f"{DISPUTE_WINDOW_DAYS} day", "sixty days",
            "sixty day", "too old", "dispute window", "dispute period", "dispute timeframe",
            "dispute time limit", "window to dispute", "time limit for disputing",
            "deadline to dispute", "too long ago", "period in which disputes",
            "because of its age",
        ),
        SAVINGS_HELD: (
            "one savings account", "already hold a savings", "already holds a savings",
            "already have a savings", "already has a savings", "already own a savings",
            "already got a savings", "already a savings account", "already an open savings",
            "already have one savings", "already have an open savings", "second savings",
            "another savings", "two savings", "single savings", "additional savings",
            "new savings account can't", "new one can't be opened", "you hold one", "already hold one", "only one allowed",
            "savings account already", "have a savings account", "hold a savings account",
        ),
    }
)  # fmt: skip

# -- what a template draws -------------------------------------------------------------------


def _customer(db: BankDB, rng: np.random.Generator) -> Customer:
    return db.customers[pick(rng, sorted(db.customers))]


def _open(db: BankDB, customer: Customer, kind: str | None = None) -> list[Account]:
    return [
        a
        for a in accounts_of(db, customer.customer_id)
        if a.status == "open" and kind in (None, a.kind)
    ]


def _savings_held(db: BankDB, customer: Customer) -> bool:
    return any(
        a.kind == "savings" and a.status != "closed" for a in accounts_of(db, customer.customer_id)
    )


def _active_cards(db: BankDB, customer: Customer) -> list[Card]:
    """Active cards of open accounts whose last four digits tell them apart."""
    owned = {a.account_id for a in accounts_of(db, customer.customer_id)}
    cards = [c for c in db.cards.values() if c.account_id in owned]
    endings = [c.last_four for c in cards]
    return [
        c
        for c in cards
        if c.status == "active"
        and db.accounts[c.account_id].status == "open"
        and endings.count(c.last_four) == 1
    ]


def _disputable(db: BankDB, accounts: list[Account]) -> list[Transaction]:
    return [
        t
        for account in accounts
        for t in account.transactions
        if t.kind == "card" and not t.disputed and (db.today - t.date).days <= DISPUTE_WINDOW_DAYS
    ]


def _amount(rng: np.random.Generator, cap: float) -> float | None:
    """A transfer amount of at most ``cap`` (whole dollars or with cents), or None."""
    cap = min(cap, 1500.0)
    if cap < 5:
        return None
    if rng.random() < 0.5:
        return float(5 * int(rng.integers(1, int(cap // 5) + 1)))
    return round(float(rng.uniform(5, cap)), 2)


def _payee(db: BankDB, customer: Customer, rng: np.random.Generator) -> Account:
    """An open account of another customer."""
    others = [
        a
        for a in db.accounts.values()
        if a.status == "open" and a.customer_id != customer.customer_id
    ]
    return pick(rng, others)


def _payment(db: BankDB, rng: np.random.Generator) -> tuple[Customer, Account, Account] | None:
    """A customer with exactly one open checking account, that account and a payee (an open
    account of another customer); None when the customer has no single checking account."""
    customer = _customer(db, rng)
    checking = _open(db, customer, "checking")
    if len(checking) != 1:
        return None
    return customer, checking[0], _payee(db, customer, rng)


# -- how the customer speaks -------------------------------------------------------------------


def _verify(customer: Customer) -> tuple[ToolCall, ...]:
    return (
        call("find_customer_id", full_name=customer.full_name, phone=customer.phone),
        call(
            "verify_identity",
            customer_id=customer.customer_id,
            date_of_birth=customer.date_of_birth.isoformat(),
        ),
    )


def _hello(customer: Customer) -> str:
    return (
        f"Hi, I'm {customer.full_name}, phone {customer.phone}, date of birth "
        f"{customer.date_of_birth.isoformat()}."
    )


def _identity_facts(customer: Customer) -> tuple[UserFact, ...]:
    return (
        UserFact(
            NAME_PHONE,
            f"I'm {customer.full_name}, my phone number is {customer.phone}.",
            needed_by=("find_customer_id",),
        ),
        UserFact(
            BIRTH,
            f"My date of birth is {customer.date_of_birth.isoformat()}.",
            needed_by=("verify_identity",),
        ),
    )


def _charge(transaction: Transaction) -> str:
    return (
        f"the {money(-transaction.amount)} charge at {transaction.description} on "
        f"{transaction.date.isoformat()}"
    )


# -- level 1: one action, everything in the request --------------------------------------------


def _transfer_own(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    accounts = _open(db, customer)
    if len(accounts) < 2:
        return None
    source, target = (accounts[int(i)] for i in rng.choice(len(accounts), 2, replace=False))
    amount = _amount(rng, source.balance)
    if amount is None:
        return None
    return ToolTask(
        1,
        f"{_hello(customer)} Please transfer {money(amount)} from my {source.kind} account "
        f"{source.account_id} to my {target.kind} account {target.account_id}.",
        (
            *_verify(customer),
            call(
                "transfer_funds",
                from_account_id=source.account_id,
                to_account_id=target.account_id,
                amount=amount,
            ),
        ),
        goal=f"transfer {money(amount)} from {source.account_id} to {target.account_id}",
    )


def _pay(db: BankDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    """Send money from the only open checking account to another customer's account."""
    drawn = _payment(db, rng)
    if drawn is None:
        return None
    customer, source, payee = drawn
    amount = _amount(rng, min(source.balance, DAILY_LIMIT - sent_today(db, customer.customer_id)))
    if amount is None:
        return None
    actions = (
        *_verify(customer),
        call(
            "transfer_funds",
            from_account_id=source.account_id,
            to_account_id=payee.account_id,
            amount=amount,
        ),
    )
    goal = f"send {money(amount)} from {source.account_id} to {payee.account_id}"
    if level == 1:
        return ToolTask(
            1,
            f"{_hello(customer)} Please send {money(amount)} from my checking account "
            f"{source.account_id} to account {payee.account_id}; it's for my rent.",
            actions,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hi, I need to send some money from my checking account to a friend.",
        actions,
        facts=(
            *_identity_facts(customer),
            UserFact(AMOUNT, f"{money(amount)}, please.", needed_by=("transfer_funds",)),
            UserFact(
                DESTINATION,
                f"My friend's account number is {payee.account_id}.",
                needed_by=("transfer_funds",),
            ),
        ),
        goal=goal,
    )


def _block_card(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    cards = _active_cards(db, customer)
    if not cards:
        return None
    card, reason = pick(rng, cards), pick(rng, sorted(BLOCK_REASONS))
    return ToolTask(
        1,
        f"{_hello(customer)} Please block my debit card ending in {card.last_four}; "
        f"{BLOCK_REASONS[reason]}.",
        (*_verify(customer), call("block_card", card_id=card.card_id, reason=reason)),
        goal=f"block card {card.card_id} ({reason})",
    )


def _update_address(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    address = random_address(rng)
    if address == customer.address:
        return None
    return ToolTask(
        1,
        f"{_hello(customer)} I moved: please change my address to {address.street}, "
        f"{address.city}, {address.state} {address.zip}.",
        (
            *_verify(customer),
            call("update_address", customer_id=customer.customer_id, **address.model_dump()),
        ),
        goal=f"change the address to {address.street}, {address.city}",
    )


def _update_phone(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    phone = f"{pick(rng, AREA_CODES)}-555-{int(rng.integers(0, 10_000)):04d}"
    if any(c.phone == phone for c in db.customers.values()):
        return None
    return ToolTask(
        1,
        f"{_hello(customer)} I have a new phone number, {phone}; please update it.",
        (*_verify(customer), call("update_phone", customer_id=customer.customer_id, phone=phone)),
        goal=f"change the phone number to {phone}",
    )


def _open_savings(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    if _savings_held(db, customer):
        return None
    return ToolTask(
        1,
        f"{_hello(customer)} I'd like to open a savings account.",
        (
            *_verify(customer),
            call("open_account", customer_id=customer.customer_id, kind="savings"),
        ),
        goal="open a savings account",
    )


def _dispute(db: BankDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    customer = _customer(db, rng)
    charges = _disputable(db, accounts_of(db, customer.customer_id))
    if not charges:
        return None
    charge, reason = pick(rng, charges), pick(rng, sorted(DISPUTE_REASONS))
    actions = (
        *_verify(customer),
        call("dispute_transaction", transaction_id=charge.transaction_id, reason=reason),
    )
    goal = f"dispute {charge.transaction_id} ({reason})"
    if level == 1:
        return ToolTask(
            1,
            f"{_hello(customer)} I want to dispute {_charge(charge)}: {DISPUTE_REASONS[reason]}.",
            actions,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hello, there's a charge on my account that I want to dispute.",
        actions,
        facts=(
            *_identity_facts(customer),
            UserFact(CHARGE, f"It's {_charge(charge)}.", needed_by=("dispute_transaction",)),
            UserFact(REASON, DISPUTE_REASONS[reason] + ".", needed_by=("dispute_transaction",)),
        ),
        goal=goal,
    )


# -- level 2: several dependent actions ---------------------------------------------------------


def _replace_card(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    cards = _active_cards(db, customer)
    if not cards:
        return None
    card, reason = pick(rng, cards), pick(rng, sorted(BLOCK_REASONS))
    return ToolTask(
        2,
        f"{_hello(customer)} My debit card ending in {card.last_four}: {BLOCK_REASONS[reason]}. "
        "Please block it and send me a replacement. What will the new card's last four digits be?",
        (
            *_verify(customer),
            call("block_card", card_id=card.card_id, reason=reason),
            call("order_replacement_card", card_id=card.card_id),
        ),
        goal=f"block card {card.card_id} ({reason}) and order a replacement",
    )


def _move_and_replace(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    cards = _active_cards(db, customer)
    address = random_address(rng)
    if not cards or address == customer.address:
        return None
    card = pick(rng, cards)
    return ToolTask(
        2,
        f"{_hello(customer)} I just moved to {address.street}, {address.city}, {address.state} "
        f"{address.zip}, please update my address. Also my debit card ending in {card.last_four} "
        "is damaged: block it and send a replacement to my new address. What will the new "
        "card's last four digits be?",
        (
            *_verify(customer),
            call("update_address", customer_id=customer.customer_id, **address.model_dump()),
            call("block_card", card_id=card.card_id, reason="damaged"),
            call("order_replacement_card", card_id=card.card_id),
        ),
        goal=f"change the address, then block and replace card {card.card_id}",
    )


def _transfer_and_report(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    task = _transfer_own(db, rng)
    if task is None:
        return None
    source = task.actions[-1].arguments["from_account_id"]
    return ToolTask(
        2,
        f"{task.request} How much will be left in account {source}?",
        task.actions,
        goal=task.goal,
    )


def _open_and_fund(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    checking = _open(db, customer, "checking")
    if _savings_held(db, customer) or not checking:
        return None
    source = pick(rng, checking)
    amount = _amount(rng, source.balance)
    if amount is None:
        return None
    new_id = next_account_id(db)
    return ToolTask(
        2,
        f"{_hello(customer)} Please open a savings account for me and move {money(amount)} into "
        f"it from my checking account {source.account_id}. What's the new account's number?",
        (
            *_verify(customer),
            call("open_account", customer_id=customer.customer_id, kind="savings"),
            call(
                "transfer_funds",
                from_account_id=source.account_id,
                to_account_id=new_id,
                amount=amount,
            ),
        ),
        goal=f"open savings {new_id} and move {money(amount)} into it from {source.account_id}",
    )


def _close_savings(db: BankDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    customer = _customer(db, rng)
    savings, checking = _open(db, customer, "savings"), _open(db, customer, "checking")
    if not savings or not checking or savings[0].balance <= 0:
        return None
    closing, target = savings[0], pick(rng, checking)
    actions = (
        *_verify(customer),
        call(
            "transfer_funds",
            from_account_id=closing.account_id,
            to_account_id=target.account_id,
            amount=closing.balance,
        ),
        call("close_account", account_id=closing.account_id),
    )
    total = round(target.balance + closing.balance, 2)
    report = (amount_fact(total, f"the new balance of {target.account_id}"),)
    goal = f"move the savings balance of {closing.account_id} to {target.account_id}, close it"
    if level == 2:
        return ToolTask(
            2,
            f"{_hello(customer)} Please close my savings account {closing.account_id} and move "
            f"what's in it to my checking account {target.account_id}. What will that checking "
            "account's balance be?",
            actions,
            report=report,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hi, I'd like to close my savings account but keep the money with you. What will my "
        "checking account's balance be then?",
        actions,
        facts=(
            *_identity_facts(customer),
            UserFact(
                DESTINATION,
                f"Please move the money to my checking account {target.account_id}.",
                needed_by=("transfer_funds", "close_account"),
            ),
        ),
        report=report,
        goal=goal,
    )


# -- level 3: what only the customer knows -------------------------------------------------------


def _stolen_card(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    customer = _customer(db, rng)
    cards = _active_cards(db, customer)
    if not cards:
        return None
    card = pick(rng, cards)
    charges = _disputable(db, [db.accounts[card.account_id]])
    if not charges:
        return None
    charge = pick(rng, charges)
    return ToolTask(
        3,
        "Hi, my debit card was stolen and there's a charge on it that I didn't make. "
        "I'll need a new card too.",
        (
            *_verify(customer),
            call("block_card", card_id=card.card_id, reason="stolen"),
            call(
                "dispute_transaction", transaction_id=charge.transaction_id, reason="unauthorized"
            ),
            call("order_replacement_card", card_id=card.card_id),
        ),
        facts=(
            *_identity_facts(customer),
            UserFact(
                CARD,
                f"It's my card ending in {card.last_four}.",
                needed_by=("block_card", "order_replacement_card"),
            ),
            UserFact(CHARGE, f"It's {_charge(charge)}.", needed_by=("dispute_transaction",)),
        ),
        goal=f"block {card.card_id} (stolen), dispute {charge.transaction_id}, replace the card",
    )


# -- requests the policy refuses -----------------------------------------------------------------


def _pay_over_limit(db: BankDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    """Send another customer more than what is left of today's limit (the balance covers it)."""
    drawn = _payment(db, rng)
    if drawn is None:
        return None
    customer, source, payee = drawn
    left = round(DAILY_LIMIT - sent_today(db, customer.customer_id), 2)
    high = min(source.balance, left + 1500)
    if high < left + 5:
        return None
    amount = float(5 * int(rng.integers(int(left // 5) + 1, int(high // 5) + 1)))
    why = reason_fact(
        OVER_LIMIT,
        f"that would go over the daily limit of {money(DAILY_LIMIT)} for transfers to other "
        "customers",
    )
    grounds = (
        call("list_transactions", account_id=source.account_id),
        call("transfer_funds", to_account_id=payee.account_id),
    )
    goal = f"send {money(amount)} to {payee.account_id}"
    if level == 1:
        request = (
            f"{_hello(customer)} Please send {money(amount)} from my checking account "
            f"{source.account_id} to account {payee.account_id}; it's for my rent."
        )
        return refusal(1, request, _verify(customer), *grounds, why, goal=goal)
    return refusal(
        3,
        "Hi, I need to send some money from my checking account to a friend.",
        _verify(customer),
        *grounds,
        why,
        facts=(
            *_identity_facts(customer),
            UserFact(AMOUNT, f"{money(amount)}, please."),
            UserFact(DESTINATION, f"My friend's account number is {payee.account_id}."),
        ),
        goal=goal,
    )


def _dispute_too_old(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    """Dispute a card purchase older than the dispute window."""
    customer = _customer(db, rng)
    old = [
        (account, t)
        for account in accounts_of(db, customer.customer_id)
        for t in account.transactions
        if t.kind == "card" and not t.disputed and (db.today - t.date).days > DISPUTE_WINDOW_DAYS
    ]
    if not old:
        return None
    account, charge = pick(rng, old)
    reason = pick(rng, sorted(DISPUTE_REASONS))
    return refusal(
        1,
        f"{_hello(customer)} I want to dispute {_charge(charge)}: {DISPUTE_REASONS[reason]}.",
        _verify(customer),
        call("list_transactions", account_id=account.account_id),
        call("dispute_transaction", transaction_id=charge.transaction_id),
        reason_fact(TOO_OLD, f"the purchase is more than {DISPUTE_WINDOW_DAYS} days old"),
        goal=f"dispute {charge.transaction_id} ({reason})",
    )


def _second_savings(db: BankDB, rng: np.random.Generator) -> ToolTask | None:
    """Open and fund a savings account for a customer who already holds one."""
    customer = _customer(db, rng)
    checking = _open(db, customer, "checking")
    if not _savings_held(db, customer) or not checking:
        return None
    source = pick(rng, checking)
    amount = _amount(rng, source.balance)
    if amount is None:
        return None
    return refusal(
        2,
        f"{_hello(customer)} Please open a savings account for me and move {money(amount)} into "
        f"it from my checking account {source.account_id}. What's the new account's number?",
        _verify(customer),
        call("list_accounts", customer_id=customer.customer_id),
        call("open_account", kind="savings"),
        reason_fact(SAVINGS_HELD, "you already hold a savings account"),
        goal=f"open a savings account and move {money(amount)} into it",
    )


LEVELS: dict[int, tuple[tuple[Template, ...], tuple[Template, ...]]] = {
    1: (
        (_transfer_own, lambda db, rng: _pay(db, rng, 1), _block_card, _update_address,
         _update_phone, _open_savings, lambda db, rng: _dispute(db, rng, 1)),
        (lambda db, rng: _pay_over_limit(db, rng, 1), _dispute_too_old),
    ),
    2: (
        (_replace_card, _move_and_replace, _transfer_and_report, _open_and_fund,
         lambda db, rng: _close_savings(db, rng, 2)),
        (_second_savings,),
    ),
    3: (
        (_stolen_card, lambda db, rng: _pay(db, rng, 3), lambda db, rng: _dispute(db, rng, 3),
         lambda db, rng: _close_savings(db, rng, 3)),
        (lambda db, rng: _pay_over_limit(db, rng, 3),),
    ),
}  # fmt: skip
"""Each level's templates, and those the policy refuses."""


def bank_task(db: BankDB, rng: np.random.Generator, level: int) -> ToolTask:
    """A task of ``level`` over ``db`` (see :func:`~palaestra.envs.tools.backend.draw_task`)."""
    return draw_task(db, rng, *LEVELS[level])
