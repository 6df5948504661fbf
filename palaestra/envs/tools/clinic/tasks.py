"""Clinic tasks at three levels: one action with everything in the request, several dependent
actions (find the earliest free slot, then book or move), and requests that need what only
the patient knows (identity, which appointment, which day).

Every request is specific enough that exactly one end state is right: "the earliest free
time with a cardiologist on Tuesday 2025-03-11" is drawn only when that earliest slot is
unique and the patient may take it (the same rules the tools enforce).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import ToolTask, UserFact, call, pick
from palaestra.envs.tools.clinic.database import (
    INSURERS,
    Appointment,
    ClinicDB,
    Doctor,
    Patient,
    Slot,
    random_member_id,
    random_phone,
    weekday,
)
from palaestra.envs.tools.clinic.rules import booking_problem, change_problem, waitlist_problem

SPECIALISTS = {
    "general practice": "a general practitioner",
    "cardiology": "a cardiologist",
    "dermatology": "a dermatologist",
    "neurology": "a neurologist",
    "orthopedics": "an orthopedist",
    "pediatrics": "a pediatrician",
}
NAME = ("name",)
BIRTH = ("birth", "dob", "born")
WHICH = (
    "which appointment", "what appointment", "which doctor", "what doctor", "which one",
    "which of your", "with whom",
)  # fmt: skip
DAY = ("which day", "what day", "when", "day", "date")
INSURANCE = ("insurance", "provider", "member")
TEMPLATE_DRAWS, FIT_DRAWS = 100, 20
"""Templates drawn, and draws of each template, before giving up (a template is redrawn from
fresh values until it fits, so each template of a level is about equally likely)."""

Maker = Callable[[ClinicDB, np.random.Generator], ToolTask | None]


def _when(day: str) -> str:
    return f"{weekday(day)} {day}"


def _who(patient: Patient) -> str:
    return f"I'm {patient.full_name}, born {patient.date_of_birth}."


def _identify(patient: Patient) -> ToolCall:
    return call("find_patient", full_name=patient.full_name, date_of_birth=patient.date_of_birth)


def _identity(patient: Patient) -> tuple[UserFact, ...]:
    return (
        UserFact(NAME, f"I'm {patient.full_name}."),
        UserFact(BIRTH, f"I was born on {patient.date_of_birth}."),
    )


def _report_name(doctor: Doctor) -> str:
    """How the report names a doctor: the full name without the title."""
    return doctor.name.removeprefix("Dr. ")


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


def _book_slot(db: ClinicDB, rng: np.random.Generator) -> ToolTask | None:
    slot = pick(rng, [s for s in db.slots.values() if s.status == "free"])
    patient = _taker(db, rng, slot)  # None for a slot in the past
    if patient is None:
        return None
    doctor = db.doctors[slot.doctor_id]
    return ToolTask(
        1,
        f"Hello, {_who(patient)} Please book me with {doctor.name} on {_when(slot.date)} at "
        f"{slot.time}.",
        (
            _identify(patient),
            call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
        ),
        goal=f"book {doctor.name} on {_when(slot.date)} at {slot.time}",
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
            f"Hi, {_who(patient)} Please cancel my appointment with {doctor.name} on "
            f"{_when(appointment.date)} at {appointment.time}.",
            actions,
            goal=goal,
        )
    return ToolTask(
        3,
        "Hello, I can't make one of my appointments and need to cancel it.",
        actions,
        facts=(*_identity(patient), UserFact(WHICH, f"It's my appointment with {doctor.name}.")),
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
        facts=(*_identity(patient), UserFact(INSURANCE, f"The new insurance is {new}.")),
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
    doctor, specialist = db.doctors[slot.doctor_id], SPECIALISTS[specialty]
    actions = (
        _identify(patient),
        call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
    )
    report, question = (slot.time, _report_name(doctor)), "What time is it, and with which doctor?"
    goal = f"book the earliest free time with {specialist} on {_when(slot.date)}"
    if level == 2:
        return ToolTask(
            2,
            f"Hi, {_who(patient)} I'd like the earliest free appointment with {specialist} on "
            f"{_when(slot.date)}. What time is it, and with which doctor?",
            actions,
            report=report,
            report_question=question,
            goal=goal,
        )
    return ToolTask(
        3,
        f"Hi, I need an appointment with {specialist}.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(DAY, f"{_when(slot.date)} works for me: the earliest free time that day "
                     f"with any {specialty} doctor."),
        ),
        report=report,
        report_question=question,
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
    actions = (
        _identify(patient),
        call(
            "reschedule_appointment",
            appointment_id=appointment.appointment_id,
            new_slot_id=slot.slot_id,
        ),
    )
    goal = f"move the appointment with {doctor.name} to the earliest free time on {_when(day)}"
    if level == 2:
        return ToolTask(
            2,
            f"Hi, {_who(patient)} Please move my appointment with {doctor.name} on "
            f"{_when(appointment.date)} at {appointment.time} to the earliest free time "
            f"{doctor.name} has on {_when(day)}. What's the new time?",
            actions,
            report=(slot.time,),
            report_question="What's the new time?",
            goal=goal,
        )
    return ToolTask(
        3,
        "Hi, I need to move one of my appointments to another day.",
        actions,
        facts=(
            *_identity(patient),
            UserFact(WHICH, f"It's my appointment with {doctor.name}."),
            UserFact(DAY, f"Please move it to the earliest free time on {_when(day)}."),
        ),
        report=(slot.time,),
        report_question="What's the new time?",
        goal=goal,
    )


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
        f"Hi, {_who(patient)} Please cancel my appointment with {old.name} on "
        f"{_when(appointment.date)} at {appointment.time}, and book me the earliest free time "
        f"with {new.name} on {_when(day)} instead. What time will that be?",
        (
            _identify(patient),
            call("cancel_appointment", appointment_id=appointment.appointment_id),
            call("book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id),
        ),
        report=(slot.time,),
        report_question="What time is the new appointment?",
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
        f"Hello, {_who(patient)} I'd like an appointment with {doctor.name} on {_when(day)}, "
        "any time. If nothing is free that day, please put me on the waitlist for it.",
        (
            _identify(patient),
            call(
                "join_waitlist", patient_id=patient.patient_id, doctor_id=doctor.doctor_id, date=day
            ),
        ),
        goal=f"an appointment with {doctor.name} on {_when(day)}, else that day's waitlist",
    )


LEVELS: dict[int, tuple[Maker, ...]] = {
    1: (
        _book_slot,
        lambda db, rng: _cancel(db, rng, 1),
        _phone,
        lambda db, rng: _insurance(db, rng, 1),
    ),
    2: (
        lambda db, rng: _book_specialty(db, rng, 2),
        lambda db, rng: _reschedule(db, rng, 2),
        _cancel_and_book,
        _waitlist,
    ),
    3: (
        lambda db, rng: _book_specialty(db, rng, 3),
        lambda db, rng: _reschedule(db, rng, 3),
        lambda db, rng: _cancel(db, rng, 3),
        lambda db, rng: _insurance(db, rng, 3),
    ),
}


def clinic_task(db: ClinicDB, rng: np.random.Generator, level: int) -> ToolTask:
    """A task of ``level`` over ``db``: a template, redrawn with fresh values until they fit."""
    for _ in range(TEMPLATE_DRAWS):
        maker = pick(rng, LEVELS[level])
        for _ in range(FIT_DRAWS):
            task = maker(db, rng)
            if task is not None:
                return task
    raise RuntimeError(f"no level-{level} clinic task fits this database")
