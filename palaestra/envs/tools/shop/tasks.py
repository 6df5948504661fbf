"""Shop tasks at three levels: one action, several dependent actions, and requests that need
what only the customer knows (identity, which item, where the refund goes). Each level has a
request the policy refuses (an order no longer pending, a variant out of stock): its right
end state is the database unchanged, and the customer must be told why."""

from __future__ import annotations

import numpy as np

from palaestra.envs.tools.backend import ToolTask, UserFact, call, draw_task, pick, refusal
from palaestra.envs.tools.facts import ITEM, NameKind, Vocabulary, reason_fact
from palaestra.envs.tools.people import random_address
from palaestra.envs.tools.shop.database import (
    CANCEL_REASONS,
    CATALOGUE,
    Order,
    OrderItem,
    ShopDB,
    User,
    Variant,
)

EMAIL, NAME = ("email", "e mail"), ("name", "who am i speaking", "who am i talking")
ZIP = ("zip", "postal", "postcode")
WHICH = (
    "which item", "what item", "which product", "what product", "which order", "what order",
    "items", "like to return", "want to return", "like to exchange", "want to exchange",
    "like to cancel", "want to cancel", "what did you order", "what did you buy",
    "which one", "order number",
)  # fmt: skip
REFUND = ("refund", "payment method", "money back", "reimbursed", "reimburse", "reimbursement")
REASON = ("reason", "why", "what made you")
TOPICS = (EMAIL, NAME, ZIP, WHICH, REFUND, REASON)
BY_NAME = "find_user_id_by_name_zip"
"""Every group of words a shop customer's facts are asked by."""
NOT_PENDING, OUT_OF_STOCK = "not pending", "out of stock"
VOCABULARY = Vocabulary(
    names=(NameKind(ITEM, tuple(CATALOGUE)),),
    reasons={
        NOT_PENDING: (
            "not pending", "no longer pending", "isn't pending", "not in pending",
            "only pending", "still pending", "already processed", "been processed",
            "being processed", "processed already", "marked as processed", "status processed",
            "status is processed", "already shipped", "been shipped", "has shipped",
            "shipped already", "shipped out", "already dispatched", "been dispatched",
            "already delivered", "already been delivered", "was already delivered",
            "status delivered", "already been", "on its way", "in transit", "out for delivery",
            "left our warehouse", "while an order is pending", "pending status", "too late to cancel", "no longer be cancelled",
            "can't be cancelled", "cannot be cancelled", "past the point",
        ),
        OUT_OF_STOCK: (
            "out of stock", "not in stock", "isn't in stock", "none in stock", "no stock",
            "in stock", "sold out", "unavailable", "not available", "isn't available",
            "aren't available", "no longer available", "not currently available",
            "none available", "none left", "any of those left", "run out", "ran out",
            "backordered", "zero units", "no inventory", "out of inventory",
        ),
    },
)  # fmt: skip


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


def _refund_targets(user: User, order: Order) -> list[tuple[str, str]]:
    """The refund methods allowed for ``order`` (the original one and gift cards), each with
    how the customer names it."""
    original = order.payments[0].payment_method_id
    allowed = [
        m for m in user.payment_methods.values()
        if m.kind == "gift_card" or m.payment_method_id == original
    ]  # fmt: skip
    return [
        (m.payment_method_id,
         "my gift card" if m.kind == "gift_card" else f"my card ending in {m.last_four}")
        for m in allowed
    ]  # fmt: skip


def _cancel(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    user = _user(db, rng)
    pending = _orders(db, user, "pending")
    if not pending:
        return None
    order, reason = pick(rng, pending), pick(rng, CANCEL_REASONS)
    return ToolTask(
        level=1,
        request=_cancel_request(user, order, reason),
        actions=(
            call("find_user_id_by_email", email=user.email),
            call("cancel_pending_order", order_id=order.order_id, reason=reason),
        ),
        goal=f"cancel order {order.order_id} ({reason})",
    )


def _cancel_request(user: User, order: Order, reason: str) -> str:
    """How a customer asks to cancel an order (the same whether the policy allows it or not)."""
    why = reason.replace("no longer needed", "something I no longer need")
    return f"Hi, my email is {user.email}. Please cancel my order {order.order_id}, it was {why}."


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
    targets = _refund_targets(user, order)
    if level == 3 and len(targets) < 2:
        return None  # where the refund goes must be the customer's to say
    method, method_name = pick(rng, targets)
    returning = "return_delivered_order_items"
    actions = (
        call("find_user_id_by_email", email=user.email),
        call(
            returning,
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
        return ToolTask(2, request, actions, goal=goal)
    if _named_elsewhere(db, user, order, chosen):
        return None  # the item names must identify the order
    return ToolTask(
        3,
        f"Hi, I'm {user.first_name}. I want to return some things I received.",
        actions,
        facts=(
            UserFact(EMAIL, f"My email is {user.email}.", needed_by=("find_user_id_by_email",)),
            UserFact(WHICH, f"It's {_describe(chosen)}; nothing else from that order.",
                     needed_by=(returning,)),
            UserFact(REFUND, f"Please refund it to {method_name}.", needed_by=(returning,)),
        ),
        goal=goal,
    )  # fmt: skip


def _delivered_item_variants(
    db: ShopDB, rng: np.random.Generator, *, available: bool
) -> tuple[User, Order, OrderItem, list[Variant]] | None:
    """A user, one of their delivered orders, an item of it and that product's other
    variants that are (or, ``available=False``, are not) in stock; None when there are none."""
    user = _user(db, rng)
    delivered = _orders(db, user, "delivered")
    if not delivered:
        return None
    order = pick(rng, delivered)
    item = pick(rng, order.items)
    variants = [
        v
        for v in db.products[item.product_id].variants.values()
        if v.available == available and v.item_id != item.item_id
    ]
    return (user, order, item, variants) if variants else None


def _exchange(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    drawn = _delivered_item_variants(db, rng, available=True)
    if drawn is None:
        return None
    user, order, item, options = drawn
    new = pick(rng, options)
    method, method_name = pick(rng, _refund_targets(user, order))
    difference = round(new.price - item.price, 2)
    paying = user.payment_methods[method]
    if difference > 0 and paying.kind == "gift_card" and paying.balance < difference:
        return None
    wanted = ", ".join(f"{key} {value}" for key, value in new.options.items())
    return ToolTask(
        2,
        _exchange_request(user, order, item, wanted, method_name),
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
        goal=f"exchange {item.name} in {order.order_id} for {wanted}",
    )


def _exchange_request(user: User, order: Order, item: OrderItem, wanted: str, method: str) -> str:
    """How a customer asks for an exchange (the same whether the variant is in stock or not)."""
    return (
        f"Hi, my email is {user.email}. In order {order.order_id} I got {_describe([item])}; "
        f"I'd like to exchange it for the one with {wanted}. Use {method} for any difference. "
        "What will the difference be?"
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
    cancelling = "cancel_pending_order"
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
            call(cancelling, order_id=order.order_id, reason=reason),
        ),
        facts=(
            UserFact(NAME, f"I'm {user.first_name} {user.last_name}.", needed_by=(BY_NAME,)),
            UserFact(ZIP, f"My zip code is {zip_code}.", needed_by=(BY_NAME,)),
            UserFact(WHICH, f"It's the order with the {item.name}.", needed_by=(cancelling,)),
            UserFact(REASON, f"It was {reason}.", needed_by=(cancelling,)),
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
        goal=f"cancel {cancel.order_id} and re-address {move.order_id}",
    )


# -- requests the policy refuses ---------------------------------------------------------------


def _cancel_shipped(db: ShopDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    """Cancel an order that is processed or delivered: nothing changes, and the customer
    learns that it is no longer pending."""
    user = _user(db, rng)
    shipped = _orders(db, user, "processed") + _orders(db, user, "delivered")
    if not shipped:
        return None
    order, reason = pick(rng, shipped), pick(rng, CANCEL_REASONS)
    why = reason_fact(NOT_PENDING, f"order {order.order_id} is already {order.status}")
    goal = f"cancel order {order.order_id} ({reason})"
    if level == 1:
        return refusal(
            1,
            _cancel_request(user, order, reason),
            (call("find_user_id_by_email", email=user.email),),
            call("get_order_details", order_id=order.order_id),
            call("cancel_pending_order", order_id=order.order_id),
            why,
            goal=goal,
        )  # fmt: skip
    item = pick(rng, order.items)
    if _named_elsewhere(db, user, order, [item]):
        return None
    return refusal(
        3,
        "Hello, I need to cancel an order that hasn't shipped yet.",
        (call("find_user_id_by_name_zip", first_name=user.first_name,
              last_name=user.last_name, zip=user.address.zip),),
        call("get_order_details", order_id=order.order_id),
        call("cancel_pending_order", order_id=order.order_id),
        why,
        facts=(
            UserFact(NAME, f"I'm {user.first_name} {user.last_name}.", needed_by=(BY_NAME,)),
            UserFact(ZIP, f"My zip code is {user.address.zip}.", needed_by=(BY_NAME,)),
            UserFact(WHICH, f"It's the order with the {item.name}."),
            UserFact(REASON, f"It was {reason}."),
        ),
        goal=goal,
    )  # fmt: skip


def _exchange_out_of_stock(db: ShopDB, rng: np.random.Generator) -> ToolTask | None:
    """Exchange an item for a variant that is out of stock: nothing changes."""
    drawn = _delivered_item_variants(db, rng, available=False)
    if drawn is None:
        return None
    user, order, item, gone = drawn
    product = db.products[item.product_id]
    wanted = ", ".join(f"{key} {value}" for key, value in pick(rng, gone).options.items())
    _, method_name = pick(rng, _refund_targets(user, order))
    return refusal(
        2,
        _exchange_request(user, order, item, wanted, method_name),
        (call("find_user_id_by_email", email=user.email),
         call("get_order_details", order_id=order.order_id)),
        call("get_product_details", product_id=product.product_id),
        call("exchange_delivered_order_items", order_id=order.order_id),
        reason_fact(OUT_OF_STOCK, f"the {product.name} with {wanted} is out of stock"),
        goal=f"exchange {item.name} in {order.order_id} for {wanted}",
    )  # fmt: skip


LEVELS = {
    1: ((_cancel, lambda db, rng: _new_address(_user(db, rng), rng)),
        (lambda db, rng: _cancel_shipped(db, rng, 1),)),
    2: ((lambda db, rng: _return(db, rng, 2), _exchange, _cancel_and_readdress),
        (_exchange_out_of_stock,)),
    3: ((lambda db, rng: _return(db, rng, 3), _cancel_by_item),
        (lambda db, rng: _cancel_shipped(db, rng, 3),)),
}  # fmt: skip
"""Each level's templates, and those the policy refuses."""


def shop_task(db: ShopDB, rng: np.random.Generator, level: int) -> ToolTask:
    """A task of ``level`` over ``db`` (see :func:`~palaestra.envs.tools.backend.draw_task`)."""
    return draw_task(db, rng, *LEVELS[level])
