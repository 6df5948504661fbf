"""Facts an agent must tell the user, and the values a text states, by kind and in one form.

:func:`values` reads every value a text states, by kind, each in one normal form, so the
format does not matter: ``$11458.33`` is ``$11,458.33`` (and ``$42.5`` is ``$42.50``),
``1:00 PM`` is ``13:00``, ``#w1000`` is ``#W1000``. A :class:`Fact` is one such value the
agent must state (an amount refunded, a new card's last four digits, a doctor's full name,
the reason a request was refused). Grading a message (:func:`judge`) compares normal forms:

* a fact is told when a message states its value;
* a message that states a value of a graded kind (amounts, times, ids, last four digits,
  doctors, items) that the episode never showed the agent, that is no fact and that does not
  follow from values shown by the domains' arithmetic (:func:`derived`: a new balance, an
  end time) is fabricated: listing candidates to hit the right one fails;
* a message that states more values of a fact's kind than there are facts of that kind plus
  :data:`SLACK` hedges, and tells no fact of that kind (naming the old time beside the new one
  is fine; listing every free time is not), and a sentence that offers two values of a kind
  as alternatives ("$12.00 or $15.00") tells neither;
* a refusal that names a reason of the domain that is not the task's is wrong, whatever else
  it says (stating every reason, one a message, cannot pass).

What counts as shown (:func:`shown`) is generous: every number the agent saw counts as an
amount, every four-digit run as last four digits. Reading is one pass of regular expressions
per kind; a span read as one kind is not read again as another (a slot id's time is part of
the id, a date's year is no card number).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

AMOUNT, TIME, ID, DIGITS, DOCTOR, ITEM, REASON = (
    "amount", "time", "id", "last four", "doctor", "item", "reason",
)  # fmt: skip
DATE, PHONE, NUMBER = "date", "phone", "number"
GRADED = (AMOUNT, TIME, ID, DIGITS, DOCTOR, ITEM)
"""Kinds a message must not make up (dates, phone numbers and bare numbers are the user's to
check; a reason is a phrase of the policy, not a value)."""
SLACK = {REASON: 0}
"""Values of a fact's kind a message may state beside the facts (default 2: the old time
beside the new one, the amount moved beside the new balance); a message names one reason."""
DEFAULT_SLACK = 2

Values = dict[str, set[str]]


@dataclass(frozen=True)
class Fact:
    """A value the agent must tell the user: its ``kind``, normal form ``value``, the
    ``text`` the tools write, and ``what`` it is (for logs)."""

    kind: str
    value: str
    text: str
    what: str = ""


@dataclass(frozen=True)
class NameKind:
    """Names of one kind mentioned as whole words: ``names`` (doctors: surnames, a preceding
    name from ``first_names`` makes a full name), normal form lowercase."""

    kind: str
    names: tuple[str, ...]
    first_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Vocabulary:
    """What a domain's texts name: ``names`` by kind, and ``reasons`` (a refusal's reason
    code -> the phrases that state it)."""

    names: tuple[NameKind, ...] = ()
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# -- normal forms ------------------------------------------------------------------------------

CENT = Decimal("0.01")


def normal_amount(text: str) -> str | None:
    """``"$1,234.5"`` -> ``"1234.50"``; amounts finer than cents keep their digits; None for
    what is no amount (or too long to be one)."""
    try:
        amount = abs(Decimal(text.replace(",", "").replace("$", "").strip())).normalize()
        if amount.as_tuple().exponent >= -2:  # type: ignore[operator]
            return str(amount.quantize(CENT))
    except InvalidOperation:
        return None
    return str(amount)


def normal_time(hour: int, minute: int, half: str | None) -> str | None:
    """24-hour ``HH:MM`` from a clock reading (``half``: ``"a"``, ``"p"`` or None)."""
    if half and 1 <= hour <= 12:
        hour = hour % 12 + (12 if half == "p" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return f"{hour:02d}:{minute:02d}"


def normal_id(text: str) -> str:
    return text.lstrip("#").upper()


def amount_fact(amount: float, what: str) -> Fact:
    """An amount in dollars, written like the tools write it (``$1,234.50``)."""
    text = f"${amount:,.2f}"
    return Fact(AMOUNT, normal_amount(text) or text, text, what)


def time_fact(time: str, what: str) -> Fact:
    hour, minute = (int(part) for part in time.split(":"))
    return Fact(TIME, normal_time(hour, minute, None) or time, time, what)


def id_fact(identifier: str, what: str) -> Fact:
    return Fact(ID, normal_id(identifier), identifier, what)


def digits_fact(digits: str, what: str) -> Fact:
    return Fact(DIGITS, digits, digits, what)


def name_fact(kind: str, name: str, what: str, text: str | None = None) -> Fact:
    """A name (``"Alice Chen"``, said as ``text``, say ``"Dr. Alice Chen"``)."""
    return Fact(kind, plain(name), text or name, what)


def reason_fact(code: str, text: str) -> Fact:
    """The reason a request cannot be done: a code of the domain's vocabulary, and how the
    oracle says it (a sentence with one of the code's phrases)."""
    return Fact(REASON, code, text, "why it cannot be done")


# -- reading values ----------------------------------------------------------------------------

_SLOT_ID = r"[A-Za-z]\d{2}-\d{4}-\d{2}-\d{2}-\d{2}:\d{2}"
_ID = r"#?[A-Za-z]{1,3}\d{2,}(?:-\d{2,3})?"
_SNAKE_ID = r"[a-z]+(?:_[a-z]+)+_\d+"
_IDS = re.compile(rf"(?<![\w#-])(?:{_SLOT_ID}|{_ID}|{_SNAKE_ID})(?![\w-])")
_ANY_IDS = (re.compile(rf"{_ID}|{_SNAKE_ID}"), re.compile(r"#?[A-Za-z]{1,3}\d{2,}"))
_DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
_PHONE = re.compile(r"(?<![\d-])\(?\d{3}\)?[-. ]?\d{3}[-. ]\d{4}(?![\d-])")
_MONEY = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_AMOUNT = re.compile(
    rf"(?:-?\$\s?(?P<a>{_MONEY})|\bUSD\s?(?P<b>{_MONEY})|(?P<c>{_MONEY})\s?(?:dollars?|USD)\b)",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"(?<![\d:.])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?![\d:])(?:\s?(?P<half>[ap])\.?\s?m\b\.?)?"
    r"|(?<![\d:.])(?P<h2>1[0-2]|0?[1-9])\s?(?P<half2>[ap])\.?\s?m\b\.?",
    re.IGNORECASE,
)
_FOUR_DIGITS = re.compile(r"(?<![\w$.,:/-])\d{4}(?![\w:/-]|[.,]\d)")
_ANY_FOUR = re.compile(r"(?<!\d)\d{4}(?!\d)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z0-9']+")
_LONG_RUN = re.compile(r"\w{65,}")
"""A run of letters and digits longer than any value (an id, amount, phone or name word):
read as no value, and blanked before the value patterns, which would otherwise scan it once
for each position in it (a 64 kB run of digits took seconds per message)."""


def values(text: str, vocabulary: Vocabulary = Vocabulary()) -> Values:
    """Every value ``text`` states, by kind, in normal form (see the module docstring).

    >>> found = values("Refunded $1,234.5 at 1 pm to card ending 0042; order #w1001.")
    >>> found["amount"], found["time"], found["last four"], found["id"]
    ({'1234.50'}, {'13:00'}, {'0042'}, {'W1001'})
    """
    found: Values = {kind: set() for kind in (*GRADED, REASON, DATE, PHONE, NUMBER)}
    text = _LONG_RUN.sub(" ", text)
    rest = _take(_IDS, text, found[ID], lambda m: normal_id(m.group()))
    rest = _take(_DATE, rest, found[DATE], lambda m: m.group())
    rest = _take(_PHONE, rest, found[PHONE], lambda m: re.sub(r"\D", "", m.group()))
    rest = _take(_AMOUNT, rest, found[AMOUNT], _amount_of)
    rest = _take(_CLOCK, rest, found[TIME], _time_of)
    rest = _take(_FOUR_DIGITS, rest, found[DIGITS], lambda m: m.group())
    _take(_NUMBER, rest, found[NUMBER], lambda m: _normal_number(m.group()))
    lowered = plain(text)
    for kind in vocabulary.names:
        found[kind.kind] = _names(lowered, kind)
    found[REASON] = {
        code for code, phrases in vocabulary.reasons.items() if has_phrase(lowered, phrases)
    }
    return found


def shown(text: str, vocabulary: Vocabulary = Vocabulary()) -> Values:
    """The values ``text`` shows the agent, generously: :func:`values`, plus every number as
    an amount (tools print ``"price": 24.5``), every four-digit run as last four digits, every
    id-like token (also inside longer ids) and a full name's surname alone."""
    seen = values(text, vocabulary)
    text = _LONG_RUN.sub(" ", text)
    seen[AMOUNT] |= {a for m in _NUMBER.finditer(text) if (a := normal_amount(m.group()))}
    seen[DIGITS] |= set(_ANY_FOUR.findall(text))
    seen[ID] |= {normal_id(m) for pattern in _ANY_IDS for m in pattern.findall(text)}
    for kind in vocabulary.names:
        if kind.first_names:
            seen[kind.kind] |= {name.rsplit(" ", 1)[-1] for name in seen[kind.kind]}
    return seen


def merge(into: Values, more: Values) -> None:
    """Add ``more`` to ``into``, kind by kind."""
    for kind, found in more.items():
        into.setdefault(kind, set()).update(found)


def _take(
    pattern: re.Pattern[str],
    text: str,
    into: set[str],
    normal: Callable[[re.Match[str]], str | None],
) -> str:
    """Add the normal form of each match to ``into``; the text with the matches blanked."""
    for match in pattern.finditer(text):
        value = normal(match)
        if value is not None:
            into.add(value)
    return pattern.sub(" ", text)


def _amount_of(match: re.Match[str]) -> str | None:
    return normal_amount(match.group("a") or match.group("b") or match.group("c"))


def _time_of(match: re.Match[str]) -> str | None:
    if match.group("h") is not None:
        half = (match.group("half") or "").lower() or None
        return normal_time(int(match.group("h")), int(match.group("m")), half)
    return normal_time(int(match.group("h2")), 0, match.group("half2").lower())


def _normal_number(text: str) -> str:
    """A bare number without separators or leading zeros (``"0,042"`` -> ``"42"``)."""
    digits = text.replace(",", "")
    return (digits.lstrip("0") or "0") if digits.isdigit() else digits  # int() caps digits


def plain(text: str) -> str:
    """Lowercase words joined by single spaces, quotes around them dropped (``"Dr.
    Alice-Chen's 'new'"`` -> ``"dr alice chen's new"``)."""
    words = (word.strip("'") for word in _WORD.findall(text.lower().replace("-", " ")))
    return " ".join(word for word in words if word)


_ABBREVIATION = re.compile(
    r"\b(Dr|Mrs|Mr|Ms|Prof|St|Jr|Sr|No|vs|approx|e\.g|i\.e|a\.m|p\.m)\.", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``; abbreviations ("Dr.", "a.m.", "e.g.") end none.

    >>> sentences("Shall I book Dr. Paula Lindqvist at 8 a.m. tomorrow? Thanks.")
    ['Shall I book Dr Paula Lindqvist at 8 am tomorrow?', 'Thanks.']
    """
    text = _ABBREVIATION.sub(lambda m: m.group(1).replace(".", ""), text)
    return [sentence.strip() for sentence in _SENTENCE_END.split(text) if sentence.strip()]


def has_phrase(plain_text: str, phrases: Iterable[str]) -> bool:
    """Whether a :func:`plain` text holds one of ``phrases`` as whole words.

    >>> has_phrase(plain("Should I update your file?"), ["date"])
    False
    """
    return bool(_phrases(tuple(phrases)).search(plain_text))


def _alternatives(phrases: Iterable[str]) -> str:
    return "|".join(re.escape(plain(phrase)) for phrase in sorted(phrases, key=len, reverse=True))


@functools.lru_cache(maxsize=64)
def _phrases(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``phrases`` as whole words in a :func:`plain` text."""
    return re.compile(rf"(?<![\w'])(?:{_alternatives(phrases)})(?![\w'])")


@functools.lru_cache(maxsize=16)
def _name_pattern(kind: NameKind) -> re.Pattern[str]:
    first = rf"(?:(?P<first>{_alternatives(kind.first_names)}) )?" if kind.first_names else ""
    return re.compile(rf"(?<![\w']){first}(?P<name>{_alternatives(kind.names)})(?![\w'])")


def _names(text: str, kind: NameKind) -> set[str]:
    """Names of ``kind`` in a :func:`plain` text: ``"first last"`` where a first name precedes
    the surname, else the surname; a surname also named in full counts once."""
    found = {
        f"{match.group('first') or ''} {match.group('name')}".strip()
        if kind.first_names
        else match.group("name")
        for match in _name_pattern(kind).finditer(text)
    }
    if not kind.first_names:
        return found
    named_in_full = {name.rsplit(" ", 1)[1] for name in found if " " in name}
    return {name for name in found if " " in name or name not in named_in_full}


# -- values worked out from values shown ------------------------------------------------------

MAX_MINUTES = 24 * 60


def derived(kind: str, value: str, seen: Mapping[str, set[str]]) -> bool:
    """Whether ``value`` follows from values ``seen`` (or told) by the domains' arithmetic: an
    amount that is the sum or difference of two amounts shown (a gift card's new balance, what
    is left of a daily limit), a time that is a time shown plus a number of minutes shown (an
    appointment's end).

    >>> derived("amount", "75.00", {"amount": {"100.00", "25.00"}})
    True
    >>> derived("time", "09:30", {"time": {"09:00"}, "number": {"30"}})
    True
    """
    if kind == AMOUNT:
        amounts = seen.get(AMOUNT, set())
        target = Decimal(value)
        return any(
            normal_amount(str(abs(target - Decimal(other)))) in amounts
            or normal_amount(str(target + Decimal(other))) in amounts
            for other in amounts
        )
    if kind == TIME:
        numbers = seen.get(NUMBER, set())
        minutes = {int(n) for n in numbers if n.isdigit() and len(n) <= 4 and int(n) <= MAX_MINUTES}
        hour, minute = (int(part) for part in value.split(":"))
        return any(
            (hour * 60 + minute - int(h) * 60 - int(m)) in minutes
            for h, m in (t.split(":") for t in seen.get(TIME, set()))
        )
    return False


def worked_out_from(kind: str, value: str, reference: str, seen: Mapping[str, set[str]]) -> bool:
    """Whether ``value`` follows from a fact's ``reference`` value and one value ``seen`` by the
    domains' arithmetic: an amount that is the reference plus or minus an amount shown (the new
    balance after the amount moved, what is left of a daily limit), a time that is the reference
    time plus a number of minutes shown (the appointment's end).

    >>> worked_out_from("amount", "75.00", "25.00", {"amount": {"100.00"}})
    True
    >>> worked_out_from("time", "09:30", "09:00", {"number": {"30"}})
    True
    """
    if kind == AMOUNT:  # nothing follows from $0.00 (every amount would)
        target, fact = Decimal(value), Decimal(reference)
        amounts = seen.get(AMOUNT, set()) - {"0.00"}
        return bool(fact) and any(
            normal_amount(str(x)) in amounts for x in (abs(target - fact), target + fact)
        )
    if kind == TIME:
        return derived(TIME, value, {TIME: {reference}, NUMBER: seen.get(NUMBER, set())})
    return False


def known(fact: Fact, seen: Mapping[str, set[str]]) -> bool:
    """Whether the agent could know ``fact``'s value from the values ``seen``: shown, or worked
    out from them (:func:`derived`)."""
    return fact.value in seen.get(fact.kind, set()) or derived(fact.kind, fact.value, seen)


# -- grading a message -------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgment:
    """What one message to the user did: the facts it told, the values it made up, and
    every value it stated (by kind)."""

    told: frozenset[Fact]
    fabricated: tuple[str, ...]
    stated: Values


def judge(
    message: str, facts: Iterable[Fact], seen: Mapping[str, set[str]], vocabulary: Vocabulary
) -> Judgment:
    """Which ``facts`` ``message`` tells, and which values it states that are neither facts nor
    ``seen`` (see the module docstring)."""
    found = values(message, vocabulary)
    required: dict[str, set[str]] = {}
    for fact in facts:
        required.setdefault(fact.kind, set()).add(fact.value)
    fabricated = tuple(
        f"{kind} {value}"
        for kind in GRADED
        for value in sorted(found[kind])
        if value not in seen.get(kind, set())
        and value not in required.get(kind, set())
        and not derived(
            kind, value, {**seen, kind: seen.get(kind, set()) | required.get(kind, set())}
        )
    )
    if REASON in required:  # a refusal: a reason that does not apply is a wrong answer
        fabricated += tuple(f"reason {code}" for code in sorted(found[REASON] - required[REASON]))
    hedged = _hedged(message, vocabulary) | _listed(message, vocabulary)
    told = frozenset(
        fact
        for fact in facts
        if fact.value in found[fact.kind]
        and (fact.kind, fact.value) not in hedged
        and len(found[fact.kind]) <= len(required[fact.kind]) + SLACK.get(fact.kind, DEFAULT_SLACK)
    )
    return Judgment(told, fabricated, found)


_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|might)\b|\bsomewhere between\b", re.IGNORECASE
)
"""Words that offer the values on either side of them as alternatives."""


_LIST_SEPARATOR = re.compile(r",(?!\d)|/|&|\band\b", re.IGNORECASE)
_FILLER = frozenset({"am", "pm", "usd", "dr", "at"})
_NONE: Values = {kind: set() for kind in (AMOUNT, TIME, DOCTOR)}
MIN_LISTED = 3
"""Values of a kind in a bare list ("$10, $12, $15") that offer them as alternatives."""


def _listed(message: str, vocabulary: Vocabulary) -> set[tuple[str, str]]:
    """(kind, value) of values given as a bare list: :data:`MIN_LISTED` or more values of an
    amount, time or doctor in a row, each after the first alone between list separators ("It
    is $10, $12, $15."). A list of candidates offers them as alternatives as "or" does; "moved
    from 09:00 to 10:30, and 14:00 stays" lists nothing.

    >>> sorted(_listed("It is $10, $12.50 and $15. Thanks", Vocabulary()))
    [('amount', '10.00'), ('amount', '12.50'), ('amount', '15.00')]
    >>> _listed("Moved from 09:00 to 10:30, and your 14:00 stays.", Vocabulary())
    set()
    """
    listed: set[tuple[str, str]] = set()
    for sentence in sentences(message):
        pieces = [(piece, values(piece, vocabulary)) for piece in _LIST_SEPARATOR.split(sentence)]
        for kind in (AMOUNT, TIME, DOCTOR):
            run: list[str] = []
            for piece, found in [*pieces, ("", _NONE)]:
                if run and len(found[kind]) == 1 and _bare(piece, found[kind]):
                    run += found[kind]
                    continue
                if len(run) >= MIN_LISTED:
                    listed |= {(kind, value) for value in run}
                run = list(found[kind]) if len(found[kind]) == 1 else []
    return listed


def _bare(piece: str, stated: set[str]) -> bool:
    """Whether ``piece`` holds nothing but its value (digits, its words, am/pm, "Dr")."""
    own = {word for value in stated for word in plain(value).split()}
    return all(w.isdigit() or w in own or w in _FILLER for w in plain(piece).split())


def _hedged(message: str, vocabulary: Vocabulary) -> set[tuple[str, str]]:
    """(kind, value) of values offered as alternatives: two or more values of a kind on
    different sides of a hedge word in one clause ("$12.00 or $15.00", "maybe 09:00, maybe
    10:00"); "moved from 09:00 to 10:30; cancel or change it later" offers none."""
    hedged: set[tuple[str, str]] = set()
    for sentence in sentences(message):
        for clause in sentence.split(";"):
            if not _HEDGE.search(clause):
                continue
            sides = [values(side, vocabulary) for side in _HEDGE.split(clause)]
            for kind in GRADED:
                if sum(bool(side[kind]) for side in sides) > 1:
                    hedged |= {(kind, value) for side in sides for value in side[kind]}
    return hedged
