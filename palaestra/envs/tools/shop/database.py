"""The shop's database: a catalogue of products in variants, customers, and their orders.

Drawn from a seed: products in variants (colour, size, ...) with prices and stock, customers
with addresses and payment methods (cards, gift cards), and orders that are pending,
processed, delivered or cancelled.
"""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
import pydantic

from palaestra.envs.tools.backend import pick
from palaestra.envs.tools.people import FIRST_NAMES, LAST_NAMES, Address, random_address

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
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


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
        address=random_address(rng),
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


def generate_shop(rng: np.random.Generator, users: int = 40) -> ShopDB:
    """A shop with ``users`` customers, each with one to four orders."""
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
