"""Action checks over the calls an agent made: required, forbidden, an order, grounded."""

from __future__ import annotations

from palaestra.envs.tools.backend import call
from palaestra.envs.tools.checks import Before, Call, Forbidden, Grounded, Required

READ = call("get_order_details", order_id="#W1004")
CANCEL = call("cancel_pending_order", order_id="#W1004")


def made(name: str, accepted: bool = True, output: str = "", **arguments: object) -> Call:
    return Call(name, arguments, accepted, writes=name.startswith("cancel"), output=output)


def test_required_needs_an_accepted_call_with_those_arguments():
    check = Required(CANCEL)
    assert check.problem([made("cancel_pending_order", order_id=" #W1004 ", reason="x")]) is None
    assert check.problem([made("cancel_pending_order", False, order_id="#W1004")])
    assert check.problem([made("cancel_pending_order", order_id="#W1005")])
    assert check.problem([])


def test_forbidden_counts_refused_calls_too():
    check = Forbidden(CANCEL)
    assert check.problem([made("cancel_pending_order", False, order_id="#W1004")])
    assert check.problem([made("cancel_pending_order", order_id="#W1005")]) is None


def test_before_wants_the_read_first_and_only_for_accepted_writes():
    check = Before(READ, CANCEL)
    read, write = made("get_order_details", order_id="#W1004"), made(CANCEL.name, order_id="#W1004")
    assert check.problem([read, write]) is None
    assert check.problem([write, read])
    assert check.problem([made("get_order_details", False, order_id="#W1004"), write])
    assert check.problem([made(CANCEL.name, False, order_id="#W1004"), read]) is None
    assert check.problem([]) is None  # no write, nothing to order


def test_grounded_takes_the_read_after_identification_or_the_tools_refusal_for_the_reason():
    check = Grounded(READ, CANCEL, ("not pending",))
    pending = "error: order #W1004 is delivered, not pending"
    assert check.problem([made("get_order_details", order_id="#W1004")]) is None
    assert check.problem([made(CANCEL.name, False, output=pending, order_id="#W1004")]) is None
    assert check.problem([made("get_order_details", order_id="#W1005")])
    # before identification, with missing arguments, or refused for another reason: nothing
    unidentified = Call(READ.name, {"order_id": "#W1004"}, True, False, identified=False)
    assert check.problem([unidentified])
    assert check.problem([made(CANCEL.name, False, output=pending)])
    locked = "error: identity checks are locked after 3 failed attempts"
    assert check.problem([made(CANCEL.name, False, output=locked, order_id="#W1004")])
    assert check.problem([made(READ.name, False, output=pending, order_id="#W1004")])


def test_numbers_compare_to_the_cent_and_lists_item_by_item():
    transfer = Required(call("transfer_funds", amount=50, item_ids=["a", "b"]))
    assert transfer.problem([made("transfer_funds", amount=50.0, item_ids=["a", "b"])]) is None
    assert transfer.problem([made("transfer_funds", amount=50.01, item_ids=["a", "b"])])
    assert transfer.problem([made("transfer_funds", amount=50.0, item_ids=["b", "a"])])
