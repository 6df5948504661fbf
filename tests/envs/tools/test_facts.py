"""Facts in one normal form: formats do not matter, made-up values and hedges do."""

from __future__ import annotations

import pytest

from palaestra.envs.tools.facts import (
    AMOUNT,
    DIGITS,
    DOCTOR,
    ITEM,
    NUMBER,
    NameKind,
    Vocabulary,
    amount_fact,
    digits_fact,
    id_fact,
    judge,
    name_fact,
    reason_fact,
    shown,
    time_fact,
    values,
)

VOCABULARY = Vocabulary(
    names=(
        NameKind(DOCTOR, ("Chen", "Okoye", "Abbott"), ("Alice", "Ben")),
        NameKind(ITEM, ("T-Shirt", "Running Shoes", "Tent")),
    ),
    reasons={"notice": ("24 hours",), "referral": ("referral",)},
)


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        (amount_fact(11458.33, "a balance"), "$11458.33"),
        (amount_fact(11458.33, "a balance"), "11,458.33 dollars"),
        (amount_fact(42.5, "a refund"), "$42.5"),
        (amount_fact(40.0, "a refund"), "$40"),
        (amount_fact(40.0, "a refund"), "USD 40.00"),
        (time_fact("13:00", "a time"), "1:00 PM"),
        (time_fact("13:00", "a time"), "1 pm"),
        (time_fact("09:30", "a time"), "9:30 a.m."),
        (time_fact("00:30", "a time"), "12:30 AM"),
        (id_fact("#W1004", "an order"), "order w1004"),
        (id_fact("A1065", "an account"), "account a1065"),
        (digits_fact("0042", "a card"), "ending in 0042."),
        (name_fact(DOCTOR, "Alice Chen", "a doctor"), "DR. ALICE CHEN"),
        (reason_fact("notice", "it starts within 24 hours"), "less than 24 hours ahead"),
    ],
)
def test_a_fact_is_told_in_any_format(fact, said):
    verdict = judge(f"Done: {said}", [fact], {}, VOCABULARY)
    assert verdict.told == {fact} and not verdict.fabricated


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        (amount_fact(42.5, "a refund"), "$142.50"),
        (amount_fact(42.5, "a refund"), "$42.51"),
        (amount_fact(42.5, "a refund"), "42.50"),  # a bare number is no amount
        (time_fact("13:00", "a time"), "13:30"),
        (time_fact("13:00", "a time"), "1:00 am"),
        (name_fact(DOCTOR, "Alice Chen", "a doctor"), "Dr. Chen"),  # the full name is the fact
        (name_fact(DOCTOR, "Alice Chen", "a doctor"), "Ben Chen"),
        (digits_fact("0042", "a card"), "10042"),
    ],
)
def test_another_value_does_not_tell_the_fact(fact, said):
    seen = shown("Alice Chen, Ben Chen, 142.50 42.51 13:30 10042", VOCABULARY)
    assert not judge(f"Done: {said}", [fact], seen, VOCABULARY).told


@pytest.mark.parametrize(
    "made_up",
    ["$9,876.54", "16:30", "order #W9999", "card ending in 7777", "Dr. Okoye", "your Tent"],
)
def test_a_value_never_shown_is_made_up(made_up):
    fact = amount_fact(42.5, "a refund")
    seen = shown(
        "refund $42.50 for the T-Shirt of order #W1004 at 09:00 by Dr. Alice Chen", VOCABULARY
    )
    verdict = judge(f"Refunded $42.50. Also {made_up}.", [fact], seen, VOCABULARY)
    assert verdict.fabricated and verdict.told == {fact}
    assert not judge("Refunded $42.50, T-Shirt, #W1004, 9am.", [fact], seen, VOCABULARY).fabricated


def test_a_hedge_tells_nothing_of_its_kind():
    time, doctor = time_fact("13:00", "a time"), name_fact(DOCTOR, "Alice Chen", "a doctor")
    seen = shown("free: 09:00 09:30 10:00 13:00 13:30; Dr. Alice Chen, Dr. Ben Okoye", VOCABULARY)
    fine = judge("Moved from 09:00 to 13:00 with Dr. Alice Chen.", [time, doctor], seen, VOCABULARY)
    assert fine.told == {time, doctor}
    hedge = judge(
        "At 09:00, 09:30, 10:00 or 13:00 with Dr. Alice Chen.", [time, doctor], seen, VOCABULARY
    )
    assert hedge.told == {doctor}  # four times for one fact: a hedge
    why = reason_fact("notice", "it starts within 24 hours")
    both = judge("It starts within 24 hours, or needs a referral.", [why], seen, VOCABULARY)
    assert not both.told  # one reason only


def test_values_read_each_span_once():
    found = values("Slot D03-2025-03-04-09:30 on 2025-03-04, call 512-555-0147.", VOCABULARY)
    assert found["id"] == {"D03-2025-03-04-09:30"} and not found["time"]
    assert not found["last four"]  # a year or a phone number's end is no card


def test_a_run_longer_than_any_value_states_none():
    """A run of digits or letters longer than any value is read as no value: the value
    patterns would otherwise scan a 64 kB run once per position (a minute of CPU a step)."""
    found = shown("9" * 5000 + " refunded $12.50 to card 0042 " + "x" * 5000)
    assert found[AMOUNT] == {"12.50", "42.00"} and found[DIGITS] == {"0042"}
    assert not values("9" * 100)[NUMBER] and values("9" * 60)[NUMBER] == {"9" * 60}
