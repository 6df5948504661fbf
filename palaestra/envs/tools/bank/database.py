"""The bank's database: customers, their checking and savings accounts, debit cards and
transactions, and the bank's "today".

Drawn from a seed: customers (name, date of birth, phone, address), one or two checking
accounts each and often a savings account (open, sometimes frozen or closed), debit cards on
checking accounts (active or blocked), and a few months of card purchases, deposits and
transfers per account, some of them disputed. Records the tools create get ids that follow
from the database alone (:func:`next_account_id`, :func:`next_card_id`,
:func:`next_transaction_id`), so the reference replay and the agent make identical records.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Literal

import numpy as np
import pydantic

from palaestra.envs.tools.backend import pick
from palaestra.envs.tools.people import FIRST_NAMES, LAST_NAMES, Address, random_address

AREA_CODES = ("512", "303", "503", "617", "312", "206")
MERCHANTS = (
    "Blue Bottle Coffee", "Whole Foods Market", "Shell", "Amazon", "Target", "Netflix", "Uber",
    "Home Depot", "Trader Joe's", "Delta Air Lines", "CVS Pharmacy", "Chipotle", "Best Buy",
    "Spotify", "REI", "Costco", "Walgreens", "Apple Store",
)  # fmt: skip
EMPLOYERS = ("Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics")
DAILY_LIMIT = 2000.0
"""Most money a customer may send to other customers' accounts in one day."""
DISPUTE_WINDOW_DAYS = 60
"""How old a card purchase may be (in days) to be disputed."""
HISTORY_DAYS = 120
"""How far back the seeded transactions go."""


class Customer(pydantic.BaseModel):
    customer_id: str
    first_name: str
    last_name: str
    date_of_birth: dt.date
    phone: str
    address: Address

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


class Transaction(pydantic.BaseModel):
    transaction_id: str
    date: dt.date
    amount: float
    """Signed: negative takes money out of the account."""
    description: str
    """The merchant of a card purchase, the payer of a deposit, or 'Transfer to A1003'."""
    kind: Literal["card", "transfer", "deposit"]
    counterparty: str | None = None
    """The other account of a transfer."""
    disputed: bool = False
    dispute_reason: str | None = None


class Account(pydantic.BaseModel):
    account_id: str
    customer_id: str
    kind: Literal["checking", "savings"]
    status: Literal["open", "frozen", "closed"]
    balance: float
    opened: dt.date
    transactions: list[Transaction] = []


class Card(pydantic.BaseModel):
    card_id: str
    account_id: str
    last_four: str
    status: Literal["active", "blocked"]
    block_reason: str | None = None
    replaced_by: str | None = None
    mailed_to: Address | None = None
    """Where a replacement card was sent."""


class BankDB(pydantic.BaseModel):
    today: dt.date
    card_salt: str
    """Drawn with the database: new cards' digits follow from it and the card id."""
    customers: dict[str, Customer]
    accounts: dict[str, Account]
    cards: dict[str, Card]


def next_account_id(db: BankDB) -> str:
    """The id the next opened account gets."""
    return f"A{1000 + len(db.accounts)}"


def next_card_id(db: BankDB) -> str:
    """The id the next issued card gets."""
    return f"CD{1000 + len(db.cards)}"


def card_last_four(db: BankDB, card_id: str) -> str:
    """The last four digits of a newly issued card, fixed by the database and the card's id
    (the replay and the agent get the same; another database, other digits)."""
    digest = hashlib.sha256(f"{db.card_salt}:{card_id}".encode()).hexdigest()
    return f"{int(digest, 16) % 10_000:04d}"


def next_transaction_id(account: Account) -> str:
    """The id of the account's next transaction (``A1004-007``)."""
    return f"{account.account_id}-{len(account.transactions) + 1:03d}"


def accounts_of(db: BankDB, customer_id: str) -> list[Account]:
    """The customer's accounts, in the order they were opened."""
    return [a for a in db.accounts.values() if a.customer_id == customer_id]


def sent_today(db: BankDB, customer_id: str) -> float:
    """Money sent today from the customer's accounts to other customers' accounts."""
    accounts = accounts_of(db, customer_id)
    own = {a.account_id for a in accounts}
    outgoing = (
        -t.amount
        for account in accounts
        for t in account.transactions
        if t.kind == "transfer" and t.date == db.today and t.amount < 0
        if t.counterparty not in own
    )
    return round(sum(outgoing), 2)


def _cents(rng: np.random.Generator, low: float, high: float) -> float:
    return round(float(rng.uniform(low, high)), 2)


def _generate_customer(rng: np.random.Generator, number: int, phones: set[str]) -> Customer:
    phone = ""
    while not phone or phone in phones:
        phone = f"{pick(rng, AREA_CODES)}-555-{int(rng.integers(0, 10_000)):04d}"
    phones.add(phone)
    born = dt.date(1950, 1, 1) + dt.timedelta(days=int(rng.integers(0, 365 * 52)))
    return Customer(
        customer_id=f"C{1000 + number}",
        first_name=pick(rng, FIRST_NAMES),
        last_name=pick(rng, LAST_NAMES),
        date_of_birth=born,
        phone=phone,
        address=random_address(rng),
    )


def _open_accounts(rng: np.random.Generator, db: BankDB, customer: Customer) -> list[Account]:
    kinds = ["checking"] * (2 if rng.random() < 0.25 else 1)
    if rng.random() < 0.65:
        kinds.append("savings")
    accounts = []
    for kind in kinds:
        status = pick(rng, ("open",) * 10 + ("frozen", "closed"))
        if kind == "checking" and not any(a.kind == "checking" for a in accounts):
            status = "frozen" if rng.random() < 0.06 else "open"
        if status == "closed":
            balance = 0.0
        elif kind == "checking":
            balance = _cents(rng, 20, 6000)
        else:
            balance = _cents(rng, 100, 25_000)
        account = Account(
            account_id=next_account_id(db),
            customer_id=customer.customer_id,
            kind=kind,
            status=status,
            balance=balance,
            opened=db.today - dt.timedelta(days=int(rng.integers(HISTORY_DAYS, 3000))),
        )
        db.accounts[account.account_id] = account
        accounts.append(account)
    return accounts


def _issue_cards(rng: np.random.Generator, db: BankDB, account: Account) -> None:
    for _ in range(2 if rng.random() < 0.15 else 1):
        card_id = next_card_id(db)
        blocked = rng.random() < 0.15
        db.cards[card_id] = Card(
            card_id=card_id,
            account_id=account.account_id,
            last_four=f"{int(rng.integers(0, 10_000)):04d}",
            status="blocked" if blocked else "active",
            block_reason=pick(rng, ("lost", "stolen", "damaged")) if blocked else None,
        )


def _transfer_out(rng: np.random.Generator, day: dt.date, payee: str, high: float) -> Transaction:
    amount = -_cents(rng, 20, high)
    return Transaction(
        transaction_id="",
        date=day,
        amount=amount,
        description=f"Transfer to {payee}",
        kind="transfer",
        counterparty=payee,
    )


def _past_transaction(
    rng: np.random.Generator, account: Account, day: dt.date, payees: list[str]
) -> Transaction:
    """A card purchase (checking only), a deposit or a transfer out (its id is set later)."""
    roll = rng.random()
    if account.kind == "checking" and roll < 0.65:
        amount, merchant = -_cents(rng, 4, 260), pick(rng, MERCHANTS)
        disputed = bool(rng.random() < 0.08)
        return Transaction(
            transaction_id="",
            date=day,
            amount=amount,
            description=merchant,
            kind="card",
            disputed=disputed,
            dispute_reason="unauthorized" if disputed else None,
        )
    if roll < 0.85:
        amount, employer = _cents(rng, 300, 3200), pick(rng, EMPLOYERS)
        return Transaction(
            transaction_id="",
            date=day,
            amount=amount,
            description=f"Payroll {employer}",
            kind="deposit",
        )
    return _transfer_out(rng, day, pick(rng, payees), 600)


def _history(rng: np.random.Generator, db: BankDB, account: Account, payees: list[str]) -> None:
    """A few months of transactions, oldest first (closed accounts stop a month ago)."""
    latest = 30 if account.status == "closed" else 0
    entries = [
        _past_transaction(
            rng,
            account,
            db.today - dt.timedelta(days=int(rng.integers(latest, HISTORY_DAYS))),
            payees,
        )
        for _ in range(int(rng.integers(4, 11)))
    ]
    if account.kind == "checking" and account.status == "open" and rng.random() < 0.2:
        # an earlier transfer today counts toward the daily limit
        entries.append(_transfer_out(rng, db.today, pick(rng, payees), 1800))
    for entry in sorted(entries, key=lambda t: t.date):
        entry.transaction_id = next_transaction_id(account)
        account.transactions.append(entry)


def generate_bank(rng: np.random.Generator, customers: int = 40) -> BankDB:
    """A bank with ``customers`` customers, their accounts, cards and transactions."""
    today = dt.date(2025, 1, 1) + dt.timedelta(days=int(rng.integers(0, 365)))
    salt = f"{int(rng.integers(2**62)):x}"
    db = BankDB(today=today, card_salt=salt, customers={}, accounts={}, cards={})
    phones: set[str] = set()
    for number in range(customers):
        customer = _generate_customer(rng, number, phones)
        db.customers[customer.customer_id] = customer
        for account in _open_accounts(rng, db, customer):
            if account.kind == "checking" and account.status != "closed":
                _issue_cards(rng, db, account)
    for account in db.accounts.values():
        payees = [a for a in db.accounts if db.accounts[a].customer_id != account.customer_id]
        _history(rng, db, account, payees)
    return db
