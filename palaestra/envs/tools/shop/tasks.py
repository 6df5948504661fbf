"""Shop tasks at three levels: one action, several dependent actions, and requests that need
what only the customer knows (identity, which item, where the refund goes)."""

from __future__ import annotations

import numpy as np

from palaestra.envs.tools.backend import ToolTask, UserFact, call, money, pick
from palaestra.envs.tools.people import random_address
from palaestra.envs.tools.shop.database import (
    CANCEL_REASONS,
    Order,
    OrderItem,
    ShopDB,
    User,
)


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
    address = random_address(rng)
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
    address = random_address(rng)
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


def shop_task(db: ShopDB, rng: np.random.Generator, level: int) -> ToolTask:
    """A task of ``level`` over ``db``; templates that do not fit the drawn customer are redrawn."""
    makers = {1: LEVEL_1, 2: LEVEL_2, 3: LEVEL_3}[level]
    while True:
        task = pick(rng, makers)(db, rng)
        if task is not None:
            return task
