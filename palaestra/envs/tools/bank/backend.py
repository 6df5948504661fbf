"""The bank's tools: identity verification, accounts, transfers, cards, disputes, contact details.

The tools enforce the policy: nothing is read or changed before the customer's identity is
verified (a customer id found by name and phone, then their date of birth; three failed
checks lock verification), and then only that customer's accounts and cards; transfers
leave open accounts with enough money, reach open accounts and respect a daily limit to
other customers; only blocked cards are replaced, once; only recent card purchases are
disputed, once; a customer keeps at most one savings account and at least one open checking
account. Graded beside: transactions are read before one is disputed
(:meth:`Bank.policy_checks`), and the new balances, card digits and account numbers are told
(the tools register them with :meth:`~Backend.tell`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any, Literal

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import Backend, call, money, require, tool
from palaestra.envs.tools.bank.database import (
    DAILY_LIMIT,
    DISPUTE_WINDOW_DAYS,
    Account,
    Address,
    BankDB,
    Card,
    Customer,
    Transaction,
    accounts_of,
    card_last_four,
    generate_bank,
    next_account_id,
    next_card_id,
    next_transaction_id,
    sent_today,
)
from palaestra.envs.tools.bank.tasks import TOPICS, VOCABULARY, bank_task
from palaestra.envs.tools.checks import ActionCheck, Before
from palaestra.envs.tools.facts import amount_fact, digits_fact, id_fact

POLICY = f"""
- Verify the customer's identity before anything else: find their customer id by full name
  and phone number, then verify it with their date of birth (three failed checks end
  verification for the conversation). Tell nothing about any account, card or transaction
  before that, and only read or change the verified customer's records.
- Transfers go from one of the customer's open accounts to another open account (the
  customer's own or another customer's, by account id), for a positive amount in dollars and
  cents that the balance covers. Frozen and closed accounts neither send nor receive money.
- Transfers to other customers' accounts are limited to {money(DAILY_LIMIT)} per day in total,
  counting the transfers already made today; transfers between the customer's own accounts
  have no limit.
- A card is blocked for a reason: lost, stolen or damaged. A replacement can only be ordered
  for a blocked card of an open account, once; it is mailed to the address on file, so update
  the address first when the customer has moved.
- Only card purchases can be disputed (not transfers or deposits), once, and only within
  {DISPUTE_WINDOW_DAYS} days of the purchase (today counts). The reason is unauthorized,
  duplicate or not received. Read the account's transactions (list_transactions) before
  disputing one.
- A customer can open a checking or savings account (it starts with a zero balance) and
  holds at most one savings account that is not closed.
- An account can be closed when it is open, its balance is zero and it is not the customer's
  last open checking account; its active cards are blocked with it.
- Phone numbers are ten digits, stored as 512-555-0147.
- Tell the customer the new balance of every account a transfer takes money from, the last
  four digits of a new card and the number of a new account.
- When the policy does not allow a request, change nothing and tell the customer why.
"""


class Bank(Backend):
    """A retail bank's support backend (see the module docstring)."""

    name = "bank"
    company = "a retail bank"
    policy = POLICY
    database_type = BankDB
    vocabulary = VOCABULARY
    topics = TOPICS
    generate = staticmethod(generate_bank)
    generate_task = staticmethod(bank_task)
    db: BankDB

    # -- session ---------------------------------------------------------------------------

    def _verified(self, customer_id: str | None = None) -> Customer:
        verified = self.session.get("customer_id")
        require(
            verified is not None,
            "verify the customer's identity first (find_customer_id, then verify_identity)",
        )
        require(
            customer_id is None or customer_id == verified,
            f"{customer_id!r} is not the verified customer ({verified})",
        )
        return self.db.customers[verified]

    def _own_account(self, account_id: str) -> Account:
        customer = self._verified()
        account = self.db.accounts.get(account_id)
        require(account is not None, f"no account {account_id!r} (account ids look like 'A1000')")
        require(
            account.customer_id == customer.customer_id,
            f"account {account_id} belongs to another customer",
        )
        return account

    def _own_card(self, card_id: str) -> Card:
        customer = self._verified()
        card = self.db.cards.get(card_id)
        require(card is not None, f"no card {card_id!r} (card ids look like 'CD1000')")
        owner = self.db.accounts[card.account_id].customer_id
        require(owner == customer.customer_id, f"card {card_id} belongs to another customer")
        return card

    def _accounts_of(self, customer: Customer) -> list[Account]:
        return accounts_of(self.db, customer.customer_id)

    def _post_transfer(self, account: Account, amount: float, counterparty: str) -> None:
        """Record one side of a transfer (``amount`` < 0 leaves ``account``) and its balance."""
        direction = "to" if amount < 0 else "from"
        account.balance = round(account.balance + amount, 2)
        account.transactions.append(
            Transaction(
                transaction_id=next_transaction_id(account),
                date=self.db.today,
                amount=amount,
                description=f"Transfer {direction} {counterparty}",
                kind="transfer",
                counterparty=counterparty,
            )
        )

    # -- identity --------------------------------------------------------------------------

    @tool
    def find_customer_id(self, full_name: str, phone: str) -> str:
        """Find a customer's id by full name and phone number (this does not verify them).

        Args:
            full_name: the customer's first and last name
            phone: the customer's phone number
        """
        self.check_identity_attempts()
        name, digits = " ".join(full_name.lower().split()), _digits(phone)
        for customer in self.db.customers.values():
            if customer.full_name.lower() == name and _digits(customer.phone) == digits:
                self.session.setdefault("found", set()).add(customer.customer_id)
                return customer.customer_id
        raise self.identity_failed("no customer with that name and phone number")

    @tool
    def verify_identity(self, customer_id: str, date_of_birth: dt.date) -> str:
        """Verify a customer's identity with their date of birth; required before anything else.

        Args:
            customer_id: the id from find_customer_id
            date_of_birth: the date of birth the customer gives, as YYYY-MM-DD
        """
        self.check_identity_attempts()
        require(
            customer_id in self.session.get("found", ()),
            f"find the customer's id with find_customer_id first ({customer_id!r} was not found "
            "in this conversation)",
        )
        if self.db.customers[customer_id].date_of_birth != date_of_birth:
            raise self.identity_failed(
                "the date of birth does not match; the customer is not verified"
            )
        self.session["customer_id"] = customer_id
        return f"customer {customer_id} verified"

    # -- reads -----------------------------------------------------------------------------

    @tool
    def get_customer(self, customer_id: str) -> dict[str, Any]:
        """The verified customer's profile: contact details, account ids and cards.

        Args:
            customer_id: the verified customer's id
        """
        customer = self._verified(customer_id)
        accounts = self._accounts_of(customer)
        owned = {a.account_id for a in accounts}
        cards = [c.model_dump(mode="json") for c in self.db.cards.values() if c.account_id in owned]
        profile = customer.model_dump(mode="json")
        return {**profile, "account_ids": sorted(owned), "cards": cards}

    @tool
    def list_accounts(self, customer_id: str) -> list[dict[str, Any]]:
        """The verified customer's accounts: kind, status, balance (no transactions).

        Args:
            customer_id: the verified customer's id
        """
        customer = self._verified(customer_id)
        return [
            a.model_dump(mode="json", exclude={"transactions"}) for a in self._accounts_of(customer)
        ]

    @tool
    def list_transactions(self, account_id: str) -> dict[str, Any]:
        """Today's date and an account's transactions, newest first (negative amounts left
        the account).

        Args:
            account_id: one of the verified customer's account ids
        """
        account = self._own_account(account_id)
        transactions = [t.model_dump(mode="json") for t in reversed(account.transactions)]
        return {"today": self.db.today.isoformat(), "transactions": transactions}

    # -- money -----------------------------------------------------------------------------

    @tool(writes=True)
    def transfer_funds(self, from_account_id: str, to_account_id: str, amount: float) -> str:
        """Move money from one of the verified customer's open accounts to an open account.

        Args:
            from_account_id: the customer's account the money leaves
            to_account_id: the account that receives it (the customer's or another customer's)
            amount: dollars, positive, at most two decimals
        """
        source = self._own_account(from_account_id)
        require(amount > 0, "the amount must be positive")
        require(round(amount, 2) == amount, "the amount must be in whole cents")
        require(source.status == "open", f"account {from_account_id} is {source.status}")
        target = self.db.accounts.get(to_account_id)
        require(target is not None, f"no account {to_account_id!r}")
        require(target is not source, "the source and destination are the same account")
        require(target.status == "open", f"account {to_account_id} is {target.status}")
        require(
            source.balance >= amount,
            f"the balance of {from_account_id} ({money(source.balance)}) does not cover "
            f"{money(amount)}",
        )
        customer = self._verified()
        if target.customer_id != customer.customer_id:
            sent = sent_today(self.db, customer.customer_id)
            require(
                round(sent + amount, 2) <= DAILY_LIMIT,
                f"over the daily limit of {money(DAILY_LIMIT)} to other customers: "
                f"{money(sent)} already sent today",
            )
        self._post_transfer(source, -amount, to_account_id)
        self._post_transfer(target, amount, from_account_id)
        self.tell(amount_fact(source.balance, f"the new balance of {from_account_id}"))
        balances = f"new balance of {from_account_id}: {money(source.balance)}"
        if target.customer_id == customer.customer_id:
            balances += f"; of {to_account_id}: {money(target.balance)}"
        return f"transferred {money(amount)} from {from_account_id} to {to_account_id}; {balances}"

    @tool(writes=True)
    def dispute_transaction(
        self, transaction_id: str, reason: Literal["unauthorized", "duplicate", "not received"]
    ) -> str:
        """Dispute a card purchase of the verified customer (within 60 days, once).

        Args:
            transaction_id: the transaction's id, from list_transactions
            reason: why the customer disputes it
        """
        customer = self._verified()
        found = [
            t
            for account in self._accounts_of(customer)
            for t in account.transactions
            if t.transaction_id == transaction_id
        ]
        require(bool(found), f"no transaction {transaction_id!r} on the customer's accounts")
        transaction = found[0]
        require(
            transaction.kind == "card",
            f"{transaction_id} is a {transaction.kind}; only card purchases can be disputed",
        )
        age = (self.db.today - transaction.date).days
        require(
            age <= DISPUTE_WINDOW_DAYS,
            f"{transaction_id} is {age} days old; disputes are accepted within "
            f"{DISPUTE_WINDOW_DAYS} days",
        )
        require(not transaction.disputed, f"{transaction_id} is already disputed")
        transaction.disputed, transaction.dispute_reason = True, reason
        return f"dispute opened for {transaction_id} ({money(-transaction.amount)}, {reason})"

    # -- cards -----------------------------------------------------------------------------

    @tool(writes=True)
    def block_card(self, card_id: str, reason: Literal["lost", "stolen", "damaged"]) -> str:
        """Block an active card of the verified customer.

        Args:
            card_id: the card's id, from get_customer
            reason: why it is blocked
        """
        card = self._own_card(card_id)
        require(card.status == "active", f"card {card_id} is already blocked")
        card.status, card.block_reason = "blocked", reason
        return f"card {card_id} (ending in {card.last_four}) blocked ({reason})"

    @tool(writes=True)
    def order_replacement_card(self, card_id: str) -> Card:
        """Order a replacement for a blocked card; it is mailed to the address on file.

        Args:
            card_id: the blocked card's id
        """
        card = self._own_card(card_id)
        require(card.status == "blocked", f"card {card_id} is active; block it first")
        require(
            card.replaced_by is None, f"card {card_id} was already replaced by {card.replaced_by}"
        )
        account = self.db.accounts[card.account_id]
        require(
            account.status == "open", f"the card's account {account.account_id} is {account.status}"
        )
        customer = self._verified()
        new_id = next_card_id(self.db)
        new = Card(
            card_id=new_id,
            account_id=card.account_id,
            last_four=card_last_four(self.db, new_id),
            status="active",
            mailed_to=customer.address.model_copy(),
        )
        self.db.cards[new_id] = new
        card.replaced_by = new_id
        self.tell(digits_fact(new.last_four, "the last four digits of the new card"))
        return new

    # -- accounts --------------------------------------------------------------------------

    @tool(writes=True)
    def open_account(self, customer_id: str, kind: Literal["checking", "savings"]) -> Account:
        """Open a checking or savings account with a zero balance for the verified customer.

        Args:
            customer_id: the verified customer's id
            kind: the kind of account
        """
        customer = self._verified(customer_id)
        if kind == "savings":
            held = [
                a.account_id
                for a in self._accounts_of(customer)
                if a.kind == "savings" and a.status != "closed"
            ]
            require(not held, f"the customer already holds a savings account {held}")
        account = Account(
            account_id=next_account_id(self.db),
            customer_id=customer_id,
            kind=kind,
            status="open",
            balance=0.0,
            opened=self.db.today,
        )
        self.db.accounts[account.account_id] = account
        self.tell(id_fact(account.account_id, f"the number of the new {kind} account"))
        return account

    @tool(writes=True)
    def close_account(self, account_id: str) -> str:
        """Close an open account with a zero balance (not the last open checking account).

        Args:
            account_id: one of the verified customer's account ids
        """
        account = self._own_account(account_id)
        require(account.status == "open", f"account {account_id} is {account.status}")
        require(
            account.balance == 0,
            f"account {account_id} holds {money(account.balance)}; move it out first",
        )
        if account.kind == "checking":
            others = [
                a
                for a in self._accounts_of(self._verified())
                if a.kind == "checking" and a.status == "open" and a is not account
            ]
            require(bool(others), f"{account_id} is the customer's last open checking account")
        blocked = []
        for card in self.db.cards.values():
            if card.account_id == account_id and card.status == "active":
                card.status, card.block_reason = "blocked", "account closed"
                blocked.append(card.card_id)
        account.status = "closed"
        return f"account {account_id} closed" + (f"; cards blocked: {blocked}" if blocked else "")

    # -- contact details -------------------------------------------------------------------

    @tool(writes=True)
    def update_phone(self, customer_id: str, phone: str) -> str:
        """Change the verified customer's phone number.

        Args:
            customer_id: the verified customer's id
            phone: the new ten-digit phone number
        """
        customer = self._verified(customer_id)
        digits = _digits(phone)
        require(len(digits) == 10, f"{phone!r} is not a ten-digit phone number")
        customer.phone = f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"
        return f"phone number changed to {customer.phone}"

    @tool(writes=True)
    def update_address(
        self, customer_id: str, street: str, city: str, state: str, zip: str
    ) -> Customer:
        """Change the verified customer's address on file.

        Args:
            customer_id: the verified customer's id
            street: street and number
            city: city
            state: two-letter state code
            zip: zip code
        """
        customer = self._verified(customer_id)
        customer.address = Address(street=street, city=city, state=state, zip=zip)
        return customer

    def policy_checks(self, actions: Sequence[ToolCall]) -> tuple[ActionCheck, ...]:
        """A disputed transaction's account is read (list_transactions) first."""
        return tuple(
            Before(
                call(
                    "list_transactions", account_id=_account_of(action.arguments["transaction_id"])
                ),
                call(action.name, transaction_id=action.arguments["transaction_id"]),
            )
            for action in actions
            if action.name == "dispute_transaction"
        )


def _account_of(transaction_id: str) -> str:
    """``"A1004-007"`` -> ``"A1004"``."""
    return transaction_id.rsplit("-", 1)[0]


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)
