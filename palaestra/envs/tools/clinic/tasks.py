"""Clinic tasks at three levels: one action with everything in the request, several dependent
actions (find the earliest free slot, then book or move), and requests that need what only
the patient knows (identity, which appointment, which day). Each level has requests the
policy refuses (a change less than 24 hours ahead, a specialist the patient may not see):
the right end state is the database unchanged, and the patient must be told why.

Every request is specific enough that exactly one end state is right: "the earliest free
time with a cardiologist on Tuesday 2025-03-11" is drawn only when that earliest slot is
unique and the patient may take it (the same rules the tools enforce). Requests name doctors
by surname ("Dr. Chen") and never give the time to be told: the full name and the time are
what the agent must find and say.
"""

from __future__ import annotations

import numpy as np

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import (
    Template,
    ToolTask,
    UserFact,
    call,
    draw_task,
    pick,
    refusal,
)
from palaestra.envs.tools.checks import Forbidden, Required
from palaestra.envs.tools.clinic.database import (
    DOCTOR_LAST_NAMES,
    FIRST_NAMES,
    INSURERS,
    PEDIATRICS,
    Appointment,
    ClinicDB,
    Doctor,
    Patient,
    Slot,
    random_member_id,
    random_phone,
    start_of,
    weekday,
)
from palaestra.envs.tools.clinic.rules import (
    booking_problem,
    change_problem,
    eligibility_problem,
    waitlist_problem,
)
from palaestra.envs.tools.facts import DOCTOR, NameKind, Vocabulary, reason_fact

SPECIALISTS = {
    "general practice": "a general practitioner",
    "cardiology": "a cardiologist",
    "dermatology": "a dermatologist",
    "neurology": "a neurologist",
    "orthopedics": "an orthopedist",
    "pediatrics": "a pediatrician",
}
NAME = ("name", "who am i speaking", "who am i talking")
BIRTH = ("birth", "dob", "born", "birthday", "birthdate")
WHICH = (
    "which appointment", "what appointment", "which doctor", "what doctor", "which one",
    "which of your", "with whom", "who is your appointment", "who is the appointment",
)  # fmt: skip
DAY = ("which day", "what day", "when", "day", "date")
INSURANCE = ("insurance", "provider", "member", "insurer", "plan")
TOPICS = (NAME, BIRTH, WHICH, DAY, INSURANCE)
"""Every group of words a patient's facts are asked by."""
NOTICE, REFERRAL, AGE = "notice", "referral", "age"
VOCABULARY = Vocabulary(
    names=(NameKind(DOCTOR, DOCTOR_LAST_NAMES, FIRST_NAMES),),
    reasons={
        NOTICE: (
            "24 hours", "24 hour", "24h", "twenty four hours", "twenty four hour",
            "a day's notice", "day's notice", "less than a day", "less than one day",
            "within a day", "a day ahead", "a day away", "short notice", "too short notice",
            "too close", "too late to cancel", "cancellation deadline",
        ),
        REFERRAL: ("referral", "referrals", "referred", "refer you"),
        AGE: (
            "under 18", "under eighteen", "under the age of 18", "below 18", "under 18s",
            "younger than 18", "older than 18", "over 18", "18 or older", "age limit",
            "aged out", "by age", "too old for", "children and teenagers", "only children", "only sees children",
            "only for children", "children only", "for children", "see children",
            "sees children", "only treats minors", "minors", "a minor", "kids",
            "an adult", "adult patient", "adult patients", "adults", "not a child",
        ),
    },
)  # fmt: skip


def _when(day: str) -> str:
    return f"{weekday(day)} {day}"


def _who(patient: Patient) -> str:
    return f"I'm {patient.full_name}, born {patient.date_of_birth}."


def _identify(patient: Patient) -> ToolCall:
    return call("find_patient", full_name=patient.full_name, date_of_birth=patient.date_of_birth)


def _identity(patient: Patient) -> tuple[UserFact, ...]:
    return (
        UserFact(NAME, f"I'm {patient.full_name}.", needed_by=("find_patient",)),
        UserFact(BIRTH, f"I was born on {patient.date_of_birth}.", needed_by=("find_patient",)),
    )


def _dr(doctor: Doctor) -> str:
    """How patients name a doctor: ``"Dr. Chen"`` (the full name is the agent's to find)."""
    return f"Dr. {doctor.name.rsplit(' ', 1)[1]}"


def _at(appointment: Appointment) -> str:
    return f"{_when(appointment.date)} at {appointment.time}"


def _patient(db: ClinicDB, rng: np.random.Generator) -> Patient:
    return db.patients[pick(rng, sorted(db.patients))]


def _taker(db: ClinicDB, rng: np.random.Generator, slot: Slot) -> Patient | None:
    """A patient who may book ``slot``, or None."""
    allowed = [p for p in db.patients.values() if booking_problem(db, p, slot) is None]
    return pick(rng, allowed) if allowed else None


def _changeable(db: ClinicDB, rng: np.random.Generator) -> tuple[Patient, Appointment] | None:
    """A booked appointment that can still be cancelled or moved, and its patient."""
    booked = [
        a
        for a in db.appointments.values()
        if a.status == "booked" and change_problem(db, a) is None
    ]
    if not booked:
        return None
    appointment = pick(rng, booked)
    return db.patients[appointment.patient_id], appointment


def _earliest(db: ClinicDB, doctors: list[Doctor], day: str) -> Slot | None:
    """The earliest free future slot of ``doctors`` on ``day``, when exactly one is earliest."""
    slots = [s for d in doctors for s in db.free_slots(d.doctor_id, day)]
    if not slots:
        return None
    first = min(s.time for s in slots)
    earliest = [s for s in slots if s.time == first]
    return earliest[0] if len(earliest) == 1 else None


def _open_day(
    db: ClinicDB, rng: np.random.Generator, doctors: list[Doctor], but: str = ""
) -> str | None:
    """A day (other than ``but``) on which one of ``doctors`` has a free future slot."""
    days = sorted({day for d in doctors for day in db.working_days(d.doctor_id)} - {but})
    open_days = [day for day in days if any(db.free_slots(d.doctor_id, day) for d in doctors)]
    return pick(rng, open_days) if open_days else None


# -- level 1 -----------------------------------------------------------------------------------


def _book_doctor(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    doctor = pick(rng, list(db.doctors.values()))
    day = _open_day(db, rng, [doctor])
    slot = db.free_slots(doctor.doctor_id, day)[0] if day else None
    patient = _taker(db, rng, slot) if slot else None
    if slot is None or patient is None:
        return None
    return ToolTask(
        1,
        f"Hello, {_who(patient)} Please book me the earliest free time with {_dr(doctor)} on "
        f"{_when(slot.date)}.",
        (
            _identify(patient),
            call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
        ),
        goal=f"book the earliest free time with {doctor.name} on {_when(slot.date)}",
    )


def _cancel(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    drawn = _changeable(db, rng)
    if drawn is None:
        return None
    patient, appointment = drawn
    doctor = db.doctors[appointment.doctor_id]
    actions = (
        _identify(patient),
        call("cancel_appointment", appointment_id=appointment.appointment_id),
    )
    goal = f"cancel the appointment with {doctor.name} on {_when(appointment.date)}"
    if level == 1:
        return ToolTask(
            1,
            f"Hi, {_who(patient)} Please cancel my appointment with {_dr(doctor)} on "
            f"{_at(appointment)}.",
            actions,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hello, I can't make one of my appointments and need to cancel it.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(
                WHICH, f"It's my appointment with {_dr(doctor)}.", needed_by=(actions[-1].name,)
            ),
        ),
        goal=goal,
    )


def _phone(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    patient = _patient(db, rng)
    phone = random_phone(rng)
    if phone == patient.phone:
        return None
    return ToolTask(
        1,
        f"Hi, {_who(patient)} My phone number changed; please update it to {phone}.",
        (_identify(patient), call("update_phone", patient_id=patient.patient_id, phone=phone)),
        goal=f"change the phone number to {phone}",
    )


def _insurance(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    patient = _patient(db, rng)
    provider = pick(rng, [i for i in INSURERS if i != patient.insurance.provider])
    member_id = random_member_id(rng, provider)
    actions = (
        _identify(patient),
        call(
            "update_insurance",
            patient_id=patient.patient_id,
            provider=provider,
            member_id=member_id,
        ),
    )
    new = f"{provider}, member ID {member_id}"
    if level == 1:
        return ToolTask(
            1,
            f"Hello, {_who(patient)} I changed insurance: it's now {new}. Please update my file.",
            actions,
            goal=f"change the insurance to {new}",
        )
    return ToolTask(
        3,
        "Hi, my health insurance changed and the clinic should have the new one on file.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(INSURANCE, f"The new insurance is {new}.", needed_by=("update_insurance",)),
        ),
        goal=f"change the insurance to {new}",
    )


# -- level 2 and 3 -----------------------------------------------------------------------------


def _book_specialty(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    specialty = pick(rng, sorted({d.specialty for d in db.doctors.values()}))
    doctors = [d for d in db.doctors.values() if d.specialty == specialty]
    day = _open_day(db, rng, doctors)
    slot = _earliest(db, doctors, day) if day else None
    patient = _taker(db, rng, slot) if slot else None
    if slot is None or patient is None:
        return None
    specialist = SPECIALISTS[specialty]
    actions = (
        _identify(patient),
        call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
    )
    goal = f"book the earliest free time with {specialist} on {_when(slot.date)}"
    if level == 2:
        return ToolTask(
            2,
            f"Hi, {_who(patient)} I'd like the earliest free appointment with {specialist} on "
            f"{_when(slot.date)}. What time is it, and with which doctor?",
            actions,
            goal=goal,
        )
    return ToolTask(
        3,
        f"Hi, I need an appointment with {specialist}.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(DAY, f"{_when(slot.date)} works for me: the earliest free time that day "
                     f"with any {specialty} doctor.", needed_by=("book_appointment",)),
        ),
        goal=goal,
    )  # fmt: skip


def _reschedule(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    drawn = _changeable(db, rng)
    if drawn is None:
        return None
    patient, appointment = drawn
    doctor = db.doctors[appointment.doctor_id]
    day = _open_day(db, rng, [doctor], but=appointment.date)
    if day is None:
        return None
    slot = db.free_slots(doctor.doctor_id, day)[0]
    if booking_problem(db, patient, slot, moving=appointment) is not None:
        return None
    moving = "reschedule_appointment"
    actions = (
        _identify(patient),
        call(moving, appointment_id=appointment.appointment_id, new_slot_id=slot.slot_id),
    )
    checks = (Forbidden(call("cancel_appointment", appointment_id=appointment.appointment_id)),)
    goal = f"move the appointment with {doctor.name} to the earliest free time on {_when(day)}"
    if level == 2:
        return ToolTask(
            2,
            f"Hi, {_who(patient)} Please move my appointment on {_at(appointment)} to the "
            f"earliest free time that doctor has on {_when(day)}. What's the new time, and "
            "who is the doctor again?",
            actions,
            checks=checks,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hi, I need to move one of my appointments to another day.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(WHICH, f"It's my appointment on {_at(appointment)}.", needed_by=(moving,)),
            UserFact(DAY, f"Please move it to the earliest free time that doctor has on "
                     f"{_when(day)}.", needed_by=(moving,)),
        ),
        checks=checks,
        goal=goal,
    )  # fmt: skip


def _cancel_and_book(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    drawn = _changeable(db, rng)
    if drawn is None:
        return None
    patient, appointment = drawn
    old = db.doctors[appointment.doctor_id]
    new = pick(rng, [d for d in db.doctors.values() if d.doctor_id != old.doctor_id])
    day = _open_day(db, rng, [new])
    if day is None:
        return None
    slot = db.free_slots(new.doctor_id, day)[0]
    if booking_problem(db, patient, slot) is not None:
        return None
    return ToolTask(
        2,
        f"Hi, {_who(patient)} Please cancel my appointment with {_dr(old)} on "
        f"{_at(appointment)}, and book me the earliest free time with {_dr(new)} on "
        f"{_when(day)} instead. What time will that be?",
        (
            _identify(patient),
            call("cancel_appointment", appointment_id=appointment.appointment_id),
            call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
        ),
        goal=f"cancel with {old.name}, book the earliest with {new.name} on {_when(day)}",
    )


def _waitlist(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    full = [
        (doctor, day)
        for doctor in db.doctors.values()
        for day in db.working_days(doctor.doctor_id)
        if day > db.now[:10] and not db.free_slots(doctor.doctor_id, day)
    ]
    if not full:
        return None
    doctor, day = pick(rng, full)
    allowed = [p for p in db.patients.values() if waitlist_problem(db, p, doctor, day) is None]
    if not allowed:
        return None
    patient = pick(rng, allowed)
    return ToolTask(
        2,
        f"Hello, {_who(patient)} I'd like an appointment with {_dr(doctor)} on {_when(day)}, "
        "any time. If nothing is free that day, please put me on the waitlist for it.",
        (
            _identify(patient),
            call(
                "join_waitlist", patient_id=patient.patient_id, doctor_id=doctor.doctor_id, date=day
            ),
        ),
        checks=(Required(call("find_available_slots", doctor_id=doctor.doctor_id, date=day)),),
        goal=f"an appointment with {doctor.name} on {_when(day)}, else that day's waitlist",
    )  # the day is looked up (the patient wants a free slot if there is one)


# -- requests the policy refuses -------------------------------------------------------------


def _cancel_late(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask | None:
    """Cancel an appointment that starts in less than 24 hours."""
    late = [
        a
        for a in db.appointments.values()
        if a.status == "booked"
        and start_of(a.date, a.time) > db.current
        and change_problem(db, a) is not None
    ]
    if not late:
        return None
    appointment = pick(rng, late)
    patient, doctor = db.patients[appointment.patient_id], db.doctors[appointment.doctor_id]
    why = reason_fact(NOTICE, f"the appointment on {_at(appointment)} starts in less than 24 hours")
    goal = f"cancel the appointment with {doctor.name} on {_when(appointment.date)}"
    grounds = (
        call("list_appointments", patient_id=patient.patient_id),
        call("cancel_appointment", appointment_id=appointment.appointment_id),
    )
    if level == 1:
        request = (
            f"Hi, {_who(patient)} Please cancel my appointment with {_dr(doctor)} on "
            f"{_at(appointment)}."
        )
        return refusal(1, request, (_identify(patient),), *grounds, why, goal=goal)
    return refusal(
        3,
        "Hello, I can't make one of my appointments and need to cancel it.",
        (_identify(patient),),
        *grounds,
        why,
        facts=(*_identity(patient), UserFact(WHICH, f"It's my appointment with {_dr(doctor)}.")),
        goal=goal,
    )


def _book_ineligible(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    """The earliest free time with a specialist the patient may not see (no referral, or
    pediatrics for an adult)."""
    patient = _patient(db, rng)
    barred = [d for d in db.doctors.values() if eligibility_problem(db, patient, d)]
    if not barred:
        return None
    specialty = pick(rng, sorted({d.specialty for d in barred}))
    doctors = [d for d in barred if d.specialty == specialty]
    day = _open_day(db, rng, doctors)
    if day is None:
        return None
    if specialty == PEDIATRICS:
        why = reason_fact(AGE, "pediatrics sees only patients under 18")
    else:
        why = reason_fact(REFERRAL, f"{specialty} needs a referral on file, and you have none")
    return refusal(
        2,
        f"Hi, {_who(patient)} I'd like the earliest free appointment with "
        f"{SPECIALISTS[specialty]} on {_when(day)}. What time is it, and with which doctor?",
        (_identify(patient),),
        call("get_patient", patient_id=patient.patient_id),
        call("book_appointment", patient_id=patient.patient_id),
        why,
        goal=f"the earliest free time with {SPECIALISTS[specialty]} on {_when(day)}",
    )


LEVELS: dict[int, tuple[tuple[Template, ...], tuple[Template, ...]]] = {
    1: (
        (_book_doctor, lambda db, rng: _cancel(db, rng, 1), _phone,
         lambda db, rng: _insurance(db, rng, 1)),
        (lambda db, rng: _cancel_late(db, rng, 1),),
    ),
    2: (
        (lambda db, rng: _book_specialty(db, rng, 2), lambda db, rng: _reschedule(db, rng, 2),
         _cancel_and_book, _waitlist),
        (_book_ineligible,),
    ),
    3: (
        (lambda db, rng: _book_specialty(db, rng, 3), lambda db, rng: _reschedule(db, rng, 3),
         lambda db, rng: _cancel(db, rng, 3), lambda db, rng: _insurance(db, rng, 3)),
        (lambda db, rng: _cancel_late(db, rng, 3),),
    ),
}  # fmt: skip
"""Each level's templates, and those the policy refuses."""


def clinic_task(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask:
    """A task of ``level`` over ``db`` (see :func:`~palaestra.envs.tools.backend.draw_task`)."""
    return draw_task(db, rng, *LEVELS[level])
