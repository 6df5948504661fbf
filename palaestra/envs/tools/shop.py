"""The shop domain: customers, orders, cancellations, returns, exchanges and addresses.

The database is drawn from a seed: a catalogue of products in variants (colour, size, ...)
with prices and stock, customers with addresses and payment methods (cards, gift cards), and
orders that are pending, processed, delivered or cancelled. The tools enforce the policy:
the customer must be authenticated first, only pending orders change or cancel, only
delivered orders return or exchange (once), refunds go to the original payment method or a
gift card, exchanges keep the product and need the new variant in stock.
"""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
import pydantic

from palaestra.envs.tools.backend import (
    Backend,
    ToolTask,
    UserFact,
    call,
    money,
    pick,
    require,
    tool,
)
from palaestra.tools import ToolError

POLICY = """
- Authenticate the customer before anything else: find their user id by email, or by first
  name, last name and zip code. Only act on that customer's orders and account.
- Pending orders can be cancelled (reason "no longer needed" or "ordered by mistake"), have
  their shipping address changed, or be paid with another of the customer's payment methods.
  Orders that are processed, delivered or cancelled cannot be changed or cancelled.
- Delivered orders can have items returned or exchanged, once per order: after one return or
  exchange request the order cannot be changed again, so collect every item first.
- Refunds go to the order's original payment method or to one of the customer's gift cards.
- An exchange swaps an item for another variant of the same product that is in stock; the
  price difference is charged to (or refunded to) a payment method of the customer.
- Tell the customer the amount refunded or charged.
"""

CATALOGUE: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {
    "T-Shirt": (24.0, {"color": ("black", "white", "blue", "red"), "size": ("S", "M", "L", "XL")}),
    "Running Shoes": (89.0, {"color": ("black", "white", "grey"), "size": ("8", "9", "10", "11")}),
    "Backpack": (59.0, {"color": ("black", "green", "navy"), "capacity": ("20L", "30L")}),
    "Water Bottle": (18.0, {"color": ("steel", "blue", "pink"), "capacity": ("500ml", "1L")}),
    "Desk Lamp": (45.0, {"color": ("black", "white"), "bulb": ("LED", "halogen")}),
    "Headphones": (129.0, {"color": ("black", "silver", "blue"), "type": ("wired", "wireless")}),
    "Coffee Maker": (
        99.0,
        {"capacity": ("4 cups", "8 cups", "12 cups"), "color": ("black", "red")},
    ),
    "Yoga Mat": (35.0, {"color": ("purple", "green", "black"), "thickness": ("4mm", "6mm")}),
    "Mechanical Keyboard": (110.0, {"switch": ("red", "blue", "brown"), "layout": ("US", "UK")}),
    "Jacket": (140.0, {"color": ("black", "olive", "navy"), "size": ("S", "M", "L")}),
    "Smart Watch": (199.0, {"color": ("black", "gold"), "band": ("leather", "silicone")}),
    "Tent": (180.0, {"capacity": ("2 person", "4 person"), "color": ("orange", "green")}),
}
FIRST_NAMES = (
    "Ava", "Liam", "Mia", "Noah", "Emma", "Omar", "Sofia", "Yuki", "Lucas", "Amara", "Ivan",
    "Chloe", "Mateo", "Priya", "Ethan", "Lena", "Kofi", "Isla", "Ravi", "Nora",
)  # fmt: skip
LAST_NAMES = (
    "Garcia", "Kim", "Novak", "Okafor", "Silva", "Muller", "Tanaka", "Rossi", "Khan", "Dubois",
    "Larsen", "Moreau", "Costa", "Singh", "Walsh", "Petrov", "Haddad", "Jensen",
)  # fmt: skip
CITIES = (
    ("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Portland", "OR", "972"),
    ("Boston", "MA", "021"), ("Chicago", "IL", "606"), ("Seattle", "WA", "981"),
)  # fmt: skip
STREETS = ("Oak St", "Maple Ave", "Pine Rd", "Cedar Ln", "Elm St", "Lake Dr", "Hill Rd")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class Address(pydantic.BaseModel):
    street: str
    city: str
    state: str
    zip: str


class Variant(pydantic.BaseModel):
    item_id: str
    options: dict[str, str]
    price: float
    available: bool


class Product(pydantic.BaseModel):
    product_id: str
    name: str
    variants: dict[str, Variant]


class PaymentMethod(pydantic.BaseModel):
    payment_method_id: str
    kind: Literal["credit_card", "gift_card"]
    last_four: str | None = None
    balance: float | None = None


class User(pydantic.BaseModel):
    user_id: str
    first_name: str
    last_name: str
    email: str
    address: Address
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


class OrderItem(pydantic.BaseModel):
    item_id: str
    product_id: str
    name: str
    options: dict[str, str]
    price: float


class Payment(pydantic.BaseModel):
    kind: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(pydantic.BaseModel):
    order_id: str
    user_id: str
    status: Literal[
        "pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"
    ]
    items: list[OrderItem]
    address: Address
    payments: list[Payment]
    cancel_reason: str | None = None
    returned_items: list[str] = []
    exchanged_items: dict[str, str] = {}


class ShopDB(pydantic.BaseModel):
    products: dict[str, Product]
    users: dict[str, User]
    orders: dict[str, Order]


def _generate_products(rng: np.random.Generator) -> dict[str, Product]:
    products = {}
    for index, (name, (base, dimensions)) in enumerate(CATALOGUE.items()):
        product_id = f"P{100 + index}"
        variants = {}
        for number, values in enumerate(itertools.product(*dimensions.values())):
            item_id = f"{product_id}-{number + 1:02d}"
            price = round(base * float(rng.uniform(0.85, 1.2)), 2)
            options = dict(zip(dimensions, values, strict=True))
            variants[item_id] = Variant(
                item_id=item_id, options=options, price=price, available=bool(rng.random() < 0.75)
            )
        products[product_id] = Product(product_id=product_id, name=name, variants=variants)
    return products


def _random_address(rng: np.random.Generator) -> Address:
    city, state, prefix = pick(rng, CITIES)
    street = f"{int(rng.integers(1, 999))} {pick(rng, STREETS)}"
    return Address(
        street=street, city=city, state=state, zip=f"{prefix}{int(rng.integers(10, 99))}"
    )


def _generate_user(rng: np.random.Generator, number: int) -> User:
    first, last = pick(rng, FIRST_NAMES), pick(rng, LAST_NAMES)
    user_id = f"{first.lower()}_{last.lower()}_{number}"
    methods = {}
    if rng.random() < 0.8:
        card = f"credit_card_{number}"
        methods[card] = PaymentMethod(
            payment_method_id=card,
            kind="credit_card",
            last_four=f"{int(rng.integers(0, 10000)):04d}",
        )
    if rng.random() < 0.6 or not methods:
        gift = f"gift_card_{number}"
        balance = round(float(rng.integers(0, 300)) + float(rng.integers(0, 100)) / 100, 2)
        methods[gift] = PaymentMethod(payment_method_id=gift, kind="gift_card", balance=balance)
    return User(
        user_id=user_id,
        first_name=first,
        last_name=last,
        email=f"{first.lower()}.{last.lower()}{number}@example.com",
        address=_random_address(rng),
        payment_methods=methods,
        orders=[],
    )


def _generate_order(
    rng: np.random.Generator, order_id: str, user: User, products: dict[str, Product]
) -> Order:
    chosen = rng.choice(sorted(products), size=int(rng.integers(1, 4)), replace=False)
    items = []
    for product_id in chosen:
        product = products[str(product_id)]
        variant = pick(rng, list(product.variants.values()))
        items.append(
            OrderItem(
                item_id=variant.item_id,
                product_id=product.product_id,
                name=product.name,
                options=variant.options,
                price=variant.price,
            )
        )
    method = pick(rng, sorted(user.payment_methods))
    total = round(sum(item.price for item in items), 2)
    status = pick(rng, ("pending", "pending", "processed", "delivered", "delivered", "cancelled"))
    return Order(
        order_id=order_id,
        user_id=user.user_id,
        status=status,
        items=items,
        address=user.address,
        payments=[Payment(kind="payment", amount=total, payment_method_id=method)],
        cancel_reason="no longer needed" if status == "cancelled" else None,
    )


class Shop(Backend):
    """An online shop's support backend (see the module docstring)."""

    name = "shop"
    company = "an online shop"
    policy = POLICY
    db: ShopDB

    @classmethod
    def generate(cls, rng: np.random.Generator, users: int = 40) -> ShopDB:
        products = _generate_products(rng)
        people, orders = {}, {}
        for number in range(users):
            user = _generate_user(rng, number)
            for _ in range(int(rng.integers(1, 5))):
                order_id = f"#W{1000 + len(orders)}"
                orders[order_id] = _generate_order(rng, order_id, user, products)
                user.orders.append(order_id)
            people[user.user_id] = user
        return ShopDB(products=products, users=people, orders=orders)

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
        for user in self.db.users.values():
            if user.email == email.strip().lower():
                self.session["user_id"] = user.user_id
                return user.user_id
        raise ToolError(f"no customer with email {email!r}")

    @tool
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a customer's user id by name and zip code, authenticating them.

        Args:
            first_name: the customer's first name
            last_name: the customer's last name
            zip: the zip code of the customer's address
        """
        wanted = (first_name.strip().lower(), last_name.strip().lower(), zip.strip())
        for user in self.db.users.values():
            if (user.first_name.lower(), user.last_name.lower(), user.address.zip) == wanted:
                self.session["user_id"] = user.user_id
                return user.user_id
        raise ToolError("no customer with that name and zip code")

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

    @tool
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
        refunded = 0.0
        for payment in [p for p in order.payments if p.kind == "payment"]:
            method = self._own_method(payment.payment_method_id)
            self._charge(order, method, -payment.amount)
            refunded += payment.amount
        order.status, order.cancel_reason = "cancelled", reason
        return f"order {order_id} cancelled; {money(refunded)} refunded"

    @tool
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

    @tool
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
        return f"order {order_id} now paid with {payment_method_id} ({money(paid[0].amount)})"

    @tool
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
        return f"return requested for {len(items)} item(s); {money(refund)} refunded to {payment_method_id}"

    @tool
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
        return f"exchange requested; {money(abs(difference))} {verb} {payment_method_id}"

    @tool
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

    def _order_items(self, order: Order, item_ids: list[str]) -> list[OrderItem]:
        require(bool(item_ids), "give at least one item id")
        require(len(set(item_ids)) == len(item_ids), "each item id once")
        by_id = {item.item_id: item for item in order.items}
        missing = [i for i in item_ids if i not in by_id]
        require(
            not missing, f"not in order {order.order_id}: {missing}; its items: {sorted(by_id)}"
        )
        return [by_id[i] for i in item_ids]

    # -- tasks -----------------------------------------------------------------------------

    @classmethod
    def generate_task(cls, db: ShopDB, rng: np.random.Generator, level: int) -> ToolTask:
        makers = {1: LEVEL_1, 2: LEVEL_2, 3: LEVEL_3}[level]
        while True:  # a template may not fit the drawn customer; draw again
            task = pick(rng, makers)(db, rng)
            if task is not None:
                return task


def _orders(db: ShopDB, user: User, status: str) -> list[Order]:
    return [db.orders[o] for o in user.orders if db.orders[o].status == status]


def _user(db: ShopDB, rng: np.random.Generator) -> User:
    return db.users[pick(rng, sorted(db.users))]


def _named_elsewhere(db: ShopDB, user: User, order: Order, items: list[OrderItem]) -> bool:
    """Whether another order of ``user`` holds a product of the same name as one of ``items``."""
    names = {item.name for item in items}
    return any(
        other.name in names
        for order_id in user.orders
        if order_id != order.order_id
        for other in db.orders[order_id].items
    )


def _describe(items: list[OrderItem]) -> str:
    return " and ".join(f"the {item.name} ({', '.join(item.options.values())})" for item in items)


def _refund_target(user: User, order: Order, rng: np.random.Generator) -> tuple[str, str]:
    """A refund method allowed for ``order`` and how the customer names it."""
    original = order.payments[0].payment_method_id
    gift_cards = [m for m in user.payment_methods.values() if m.kind == "gift_card"]
    if gift_cards and rng.random() < 0.5:
        return gift_cards[0].payment_method_id, "my gift card"
    method = user.payment_methods[original]
    name = "my gift card" if method.kind == "gift_card" else f"my card ending in {method.last_four}"
    return original, name


def _cancel(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    user = _user(db, rng)
    pending = _orders(db, user, "pending")
    if not pending:
        return None
    order, reason = pick(rng, pending), pick(rng, CANCEL_REASONS)
    return ToolTask(
        level=1,
        request=f"Hi, my email is {user.email}. Please cancel my order {order.order_id}, "
        f"it was {reason.replace('no longer needed', 'something I no longer need')}.",
        actions=(
            call("find_user_id_by_email", email=user.email),
            call("cancel_pending_order", order_id=order.order_id, reason=reason),
        ),
        goal=f"cancel order {order.order_id} ({reason})",
    )


def _new_address(user: User, rng: np.random.Generator) -> ToolTask | None:
    address = _random_address(rng)
    if address == user.address:
        return None
    return ToolTask(
        level=1,
        request=f"Hello, I'm {user.first_name} {user.last_name}, zip code {user.address.zip}. I moved: "
        f"please change my default address to {address.street}, {address.city}, "
        f"{address.state} {address.zip}.",
        actions=(
            call(
                "find_user_id_by_name_zip",
                first_name=user.first_name,
                last_name=user.last_name,
                zip=user.address.zip,
            ),
            call("modify_user_address", user_id=user.user_id, **address.model_dump()),
        ),
        goal=f"change the default address to {address.street}, {address.city}",
    )


def _return(db: ShopDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    user = _user(db, rng)
    delivered = _orders(db, user, "delivered")
    if not delivered:
        return None
    order = pick(rng, delivered)
    count = int(rng.integers(1, len(order.items) + 1))
    chosen = [
        order.items[int(i)] for i in sorted(rng.choice(len(order.items), count, replace=False))
    ]
    method, method_name = _refund_target(user, order, rng)
    refund = money(round(sum(item.price for item in chosen), 2))
    actions = (
        call("find_user_id_by_email", email=user.email),
        call(
            "return_delivered_order_items",
            order_id=order.order_id,
            item_ids=[item.item_id for item in chosen],
            payment_method_id=method,
        ),
    )
    goal = f"return {_describe(chosen)} from order {order.order_id}, refund to {method_name}"
    if level == 2:
        request = (
            f"Hi, my email is {user.email}. I'd like to return {_describe(chosen)} from my order "
            f"{order.order_id}, with the refund to {method_name}. How much will I get back?"
        )
        return ToolTask(
            2,
            request,
            actions,
            report=(refund,),
            report_question="How much is my refund?",
            goal=goal,
        )
    if _named_elsewhere(db, user, order, chosen):
        return None  # the item names must identify the order
    return ToolTask(
        3,
        f"Hi, I'm {user.first_name}. I want to return some things I received.",
        actions,
        facts=(
            UserFact(("email",), f"My email is {user.email}."),
            UserFact(("which item", "what item", "which product", "what product", "items"),
                     f"It's {_describe(chosen)}; nothing else from that order."),
            UserFact(("refund", "payment method", "money back"), f"Please refund it to {method_name}."),
        ),
        report=(refund,),
        report_question="How much is my refund?",
        goal=goal,
    )  # fmt: skip


def _exchange(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    user = _user(db, rng)
    delivered = _orders(db, user, "delivered")
    if not delivered:
        return None
    order = pick(rng, delivered)
    item = pick(rng, order.items)
    product = db.products[item.product_id]
    options = [v for v in product.variants.values() if v.available and v.item_id != item.item_id]
    if not options:
        return None
    new = pick(rng, options)
    method, method_name = _refund_target(user, order, rng)
    difference = round(new.price - item.price, 2)
    paying = user.payment_methods[method]
    if difference > 0 and paying.kind == "gift_card" and paying.balance < difference:
        return None
    wanted = ", ".join(f"{key} {value}" for key, value in new.options.items())
    return ToolTask(
        2,
        f"Hi, my email is {user.email}. In order {order.order_id} I got {_describe([item])}; "
        f"I'd like to exchange it for the one with {wanted}. Use {method_name} for any "
        f"difference. What will the difference be?",
        (
            call("find_user_id_by_email", email=user.email),
            call(
                "exchange_delivered_order_items",
                order_id=order.order_id,
                item_ids=[item.item_id],
                new_item_ids=[new.item_id],
                payment_method_id=method,
            ),
        ),
        report=(money(abs(difference)),),
        report_question="What is the price difference?",
        goal=f"exchange {item.name} in {order.order_id} for {wanted}",
    )


def _cancel_by_item(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    user = _user(db, rng)
    pending = _orders(db, user, "pending")
    if not pending:
        return None
    order = pick(rng, pending)
    item = pick(rng, order.items)
    if _named_elsewhere(db, user, order, [item]):
        return None  # the item must identify the order
    reason = pick(rng, CANCEL_REASONS)
    zip_code = user.address.zip
    return ToolTask(
        3,
        "Hello, I need to cancel an order that hasn't shipped yet.",
        (
            call(
                "find_user_id_by_name_zip",
                first_name=user.first_name,
                last_name=user.last_name,
                zip=zip_code,
            ),
            call("cancel_pending_order", order_id=order.order_id, reason=reason),
        ),
        facts=(
            UserFact(("name",), f"I'm {user.first_name} {user.last_name}."),
            UserFact(("zip", "postal"), f"My zip code is {zip_code}."),
            UserFact(("which order", "what order", "which item", "what item", "items"),
                     f"It's the order with the {item.name}."),
            UserFact(("reason", "why"), f"It was {reason}."),
        ),
        goal=f"cancel order {order.order_id} (the one with the {item.name}, {reason})",
    )  # fmt: skip


def _cancel_and_readdress(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    user = _user(db, rng)
    pending = _orders(db, user, "pending")
    if len(pending) < 2:
        return None
    cancel, move = pending[0], pending[1]
    address = _random_address(rng)
    return ToolTask(
        2,
        f"Hi, my email is {user.email}. Please cancel order {cancel.order_id} (ordered by "
        f"mistake) and send order {move.order_id} to {address.street}, {address.city}, "
        f"{address.state} {address.zip} instead. How much is refunded for the cancelled one?",
        (
            call("find_user_id_by_email", email=user.email),
            call("cancel_pending_order", order_id=cancel.order_id, reason="ordered by mistake"),
            call("modify_pending_order_address", order_id=move.order_id, **address.model_dump()),
        ),
        report=(money(round(sum(p.amount for p in cancel.payments), 2)),),
        report_question="How much did I get refunded?",
        goal=f"cancel {cancel.order_id} and re-address {move.order_id}",
    )


LEVEL_1 = (_cancel, lambda db, rng: _new_address(_user(db, rng), rng))
LEVEL_2 = (lambda db, rng: _return(db, rng, 2), _exchange, _cancel_and_readdress)
LEVEL_3 = (lambda db, rng: _return(db, rng, 3), _cancel_by_item)
