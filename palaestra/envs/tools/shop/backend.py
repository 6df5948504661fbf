"""The shop's tools: authentication, orders, cancellations, returns, exchanges, addresses.

The tools enforce the policy: the customer must be authenticated first (three failed
attempts lock authentication), only pending orders change or cancel, only delivered orders
return or exchange (once), refunds go to the original payment method or a gift card,
exchanges keep the product and need the new variant in stock. What the tools cannot enforce
is graded: an order is read before it is changed (:meth:`Shop.policy_checks`), and the amount
refunded or charged is told (each tool registers it with :meth:`~Backend.tell`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import Backend, call, money, require, tool
from palaestra.envs.tools.checks import ActionCheck, Before
from palaestra.envs.tools.facts import amount_fact
from palaestra.envs.tools.people import Address
from palaestra.envs.tools.shop.database import (
    Order,
    OrderItem,
    Payment,
    PaymentMethod,
    Product,
    ShopDB,
    User,
    generate_shop,
)
from palaestra.envs.tools.shop.tasks import TOPICS, VOCABULARY, shop_task

POLICY = """
- Authenticate the customer before anything else: find their user id by email, or by first
  name, last name and zip code (three failed attempts end authentication for the
  conversation). Only act on that customer's orders and account.
- Read an order's details (get_order_details) before changing it.
- Pending orders can be cancelled (reason "no longer needed" or "ordered by mistake"), have
  their shipping address changed, or be paid with another of the customer's payment methods.
  Orders that are processed, delivered or cancelled cannot be changed or cancelled.
- Delivered orders can have items returned or exchanged, once per order: after one return or
  exchange request the order cannot be changed again, so collect every item first.
- Refunds go to the order's original payment method or to one of the customer's gift cards.
- An exchange swaps an item for another variant of the same product that is in stock; the
  price difference is charged to (or refunded to) a payment method of the customer.
- Tell the customer the amount refunded or charged by every cancellation, return, exchange
  or payment change.
- When the policy does not allow a request, change nothing and tell the customer why.
"""


class Shop(Backend):
    """An online shop's support backend (see the module docstring)."""

    name = "shop"
    company = "an online shop"
    policy = POLICY
    database_type = ShopDB
    vocabulary = VOCABULARY
    topics = TOPICS
    identity_key = "user_id"
    generate = staticmethod(generate_shop)
    generate_task = staticmethod(shop_task)
    db: ShopDB

    # -- session ---------------------------------------------------------------------------

    def _authenticated(self) -> User:
        user_id = self.session.get("user_id")
        require(
            user_id is not None,
            "authenticate the customer first (find_user_id_by_email or find_user_id_by_name_zip)",
        )
        return self.db.users[user_id]

    def _own_order(self, order_id: str) -> Order:
        user = self._authenticated()
        order = self.db.orders.get(order_id)
        require(order is not None, f"no order {order_id!r} (order ids look like '#W1000')")
        require(order.user_id == user.user_id, f"order {order_id} belongs to another customer")
        return order

    def _own_method(self, payment_method_id: str) -> PaymentMethod:
        user = self._authenticated()
        method = user.payment_methods.get(payment_method_id)
        require(
            method is not None,
            f"no payment method {payment_method_id!r}; the customer's: {sorted(user.payment_methods)}",
        )
        return method

    def _charge(self, order: Order, method: PaymentMethod, amount: float) -> None:
        """Record a payment (amount > 0) or refund (amount < 0) on ``method``."""
        if amount == 0:
            return
        if method.kind == "gift_card":
            require(
                method.balance >= amount,
                f"gift card balance {money(method.balance)} does not cover {money(amount)}",
            )
            method.balance = round(method.balance - amount, 2)
        kind = "payment" if amount > 0 else "refund"
        order.payments.append(
            Payment(kind=kind, amount=abs(amount), payment_method_id=method.payment_method_id)
        )

    # -- tools -----------------------------------------------------------------------------

    @tool
    def find_user_id_by_email(self, email: str) -> str:
        """Find a customer's user id by email, authenticating them.

        Args:
            email: the customer's email address
        """
        self.check_identity_attempts()
        for user in self.db.users.values():
            if user.email == email.strip().lower():
                self.session["user_id"] = user.user_id
                return user.user_id
        raise self.identity_failed(f"no customer with email {email!r}")

    @tool
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a customer's user id by name and zip code, authenticating them.

        Args:
            first_name: the customer's first name
            last_name: the customer's last name
            zip: the zip code of the customer's address
        """
        self.check_identity_attempts()
        wanted = (first_name.strip().lower(), last_name.strip().lower(), zip.strip())
        for user in self.db.users.values():
            if (user.first_name.lower(), user.last_name.lower(), user.address.zip) == wanted:
                self.session["user_id"] = user.user_id
                return user.user_id
        raise self.identity_failed("no customer with that name and zip code")

    @tool
    def get_user_details(self, user_id: str) -> User:
        """The authenticated customer's profile: address, payment methods and order ids.

        Args:
            user_id: the id from find_user_id_by_email or find_user_id_by_name_zip
        """
        user = self._authenticated()
        require(user_id == user.user_id, "you can only read the authenticated customer's profile")
        return user

    @tool
    def get_order_details(self, order_id: str) -> Order:
        """An order of the authenticated customer: status, items, address and payments.

        Args:
            order_id: the order id, such as '#W1000'
        """
        return self._own_order(order_id)

    @tool
    def list_products(self) -> dict[str, str]:
        """Every product's id and name."""
        return {p.product_id: p.name for p in self.db.products.values()}

    @tool
    def get_product_details(self, product_id: str) -> Product:
        """A product's variants: item ids, options, prices and availability.

        Args:
            product_id: the product id, such as 'P100'
        """
        product = self.db.products.get(product_id)
        require(product is not None, f"no product {product_id!r}; see list_products")
        return product

    @tool(writes=True)
    def cancel_pending_order(
        self, order_id: str, reason: Literal["no longer needed", "ordered by mistake"]
    ) -> str:
        """Cancel a pending order; its payments are refunded to where they came from.

        Args:
            order_id: the order id
            reason: why the customer cancels
        """
        order = self._own_order(order_id)
        require(order.status == "pending", f"order {order_id} is {order.status}, not pending")
        refunded, methods = 0.0, []
        for payment in [p for p in order.payments if p.kind == "payment"]:
            method = self._own_method(payment.payment_method_id)
            self._charge(order, method, -payment.amount)
            refunded += payment.amount
            methods.append(payment.payment_method_id)
        order.status, order.cancel_reason = "cancelled", reason
        refunded = round(refunded, 2)
        self.tell(amount_fact(refunded, f"the amount refunded for {order_id}"))
        return f"order {order_id} cancelled; {money(refunded)} refunded to {', '.join(methods)}"

    @tool(writes=True)
    def modify_pending_order_address(
        self, order_id: str, street: str, city: str, state: str, zip: str
    ) -> Order:
        """Change the shipping address of a pending order.

        Args:
            order_id: the order id
            street: street and number
            city: city
            state: two-letter state code
            zip: zip code
        """
        order = self._own_order(order_id)
        require(order.status == "pending", f"order {order_id} is {order.status}, not pending")
        order.address = Address(street=street, city=city, state=state, zip=zip)
        return order

    @tool(writes=True)
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> str:
        """Pay a pending order with another of the customer's payment methods (the old payment
        is refunded).

        Args:
            order_id: the order id
            payment_method_id: the new payment method
        """
        order = self._own_order(order_id)
        require(order.status == "pending", f"order {order_id} is {order.status}, not pending")
        paid = [p for p in order.payments if p.kind == "payment"]
        require(len(paid) == 1, "only orders paid with one method can change it")
        old = self._own_method(paid[0].payment_method_id)
        new = self._own_method(payment_method_id)
        require(new is not old, f"order {order_id} is already paid with {payment_method_id}")
        self._charge(order, new, paid[0].amount)
        self._charge(order, old, -paid[0].amount)
        self.tell(amount_fact(paid[0].amount, f"the amount charged to {payment_method_id}"))
        return f"order {order_id} now paid with {payment_method_id} ({money(paid[0].amount)})"

    @tool(writes=True)
    def return_delivered_order_items(
        self, order_id: str, item_ids: list[str], payment_method_id: str
    ) -> str:
        """Request the return of items of a delivered order, refunded to the original payment
        method or a gift card. One return or exchange per order.

        Args:
            order_id: the order id
            item_ids: the item ids to return (from the order's items)
            payment_method_id: where the refund goes
        """
        order = self._own_order(order_id)
        require(order.status == "delivered", f"order {order_id} is {order.status}, not delivered")
        items = self._order_items(order, item_ids)
        method = self._own_method(payment_method_id)
        original = {p.payment_method_id for p in order.payments if p.kind == "payment"}
        require(
            method.kind == "gift_card" or payment_method_id in original,
            "refunds go to the original payment method or a gift card",
        )
        refund = round(sum(item.price for item in items), 2)
        self._charge(order, method, -refund)
        order.status, order.returned_items = "return requested", sorted(item_ids)
        self.tell(amount_fact(refund, f"the refund for {order_id}"))
        return f"return requested for {len(items)} item(s); {money(refund)} refunded to {payment_method_id}"

    @tool(writes=True)
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> str:
        """Exchange items of a delivered order for other in-stock variants of the same products;
        the price difference is charged or refunded. One return or exchange per order.

        Args:
            order_id: the order id
            item_ids: the item ids to exchange
            new_item_ids: the new variants' item ids, in the same order
            payment_method_id: pays or receives the price difference
        """
        order = self._own_order(order_id)
        require(order.status == "delivered", f"order {order_id} is {order.status}, not delivered")
        items = self._order_items(order, item_ids)
        require(len(new_item_ids) == len(items), "give one new item id per exchanged item")
        difference = 0.0
        for item, new_id in zip(items, new_item_ids, strict=True):
            variant = self.db.products[item.product_id].variants.get(new_id)
            require(variant is not None, f"{new_id!r} is not a variant of {item.name}")
            require(new_id != item.item_id, f"{new_id} is the same variant")
            require(variant.available, f"{new_id} is out of stock")
            difference += variant.price - item.price
        difference = round(difference, 2)
        self._charge(order, self._own_method(payment_method_id), difference)
        order.status = "exchange requested"
        order.exchanged_items = dict(zip(item_ids, new_item_ids, strict=True))
        verb = "charged to" if difference >= 0 else "refunded to"
        self.tell(amount_fact(abs(difference), f"the price difference {verb} {payment_method_id}"))
        return f"exchange requested; {money(abs(difference))} {verb} {payment_method_id}"

    @tool(writes=True)
    def modify_user_address(
        self, user_id: str, street: str, city: str, state: str, zip: str
    ) -> User:
        """Change the customer's default address (orders keep theirs).

        Args:
            user_id: the authenticated customer's id
            street: street and number
            city: city
            state: two-letter state code
            zip: zip code
        """
        user = self._authenticated()
        require(user_id == user.user_id, "you can only change the authenticated customer")
        user.address = Address(street=street, city=city, state=state, zip=zip)
        return user

    def policy_checks(self, actions: Sequence[ToolCall]) -> tuple[ActionCheck, ...]:
        """Each order the reference actions change is read (get_order_details) first."""
        return tuple(
            Before(
                call("get_order_details", order_id=action.arguments["order_id"]),
                call(action.name, order_id=action.arguments["order_id"]),
            )
            for action in actions
            if "order_id" in action.arguments and action.name != "get_order_details"
        )

    def _order_items(self, order: Order, item_ids: list[str]) -> list[OrderItem]:
        require(bool(item_ids), "give at least one item id")
        require(len(set(item_ids)) == len(item_ids), "each item id once")
        by_id = {item.item_id: item for item in order.items}
        missing = [i for i in item_ids if i not in by_id]
        require(
            not missing, f"not in order {order.order_id}: {missing}; its items: {sorted(by_id)}"
        )
        return [by_id[i] for i in item_ids]
