"""The clinic's booking rules, one function each: the tools refuse with their messages, and
the task generator uses them to draw only requests the policy allows.

Each returns ``None`` when the action is allowed, else why not (what the agent sees).
"""

from __future__ import annotations

from datetime import timedelta

from palaestra.envs.tools.clinic.database import (
    ADULT_AGE,
    PEDIATRICS,
    Appointment,
    ClinicDB,
    Doctor,
    Patient,
    Slot,
    eligible,
    start_of,
)

NOTICE = timedelta(hours=24)
"""How long before its start an appointment can still be cancelled or rescheduled."""


def eligibility_problem(db: ClinicDB, patient: Patient, doctor: Doctor) -> str | None:
    """Referral and age rules of the doctor's specialty."""
    if eligible(db, patient, doctor):
        return None
    if doctor.specialty == PEDIATRICS:
        return f"pediatrics sees patients under {ADULT_AGE} only; {patient.full_name} is an adult"
    return (
        f"{doctor.specialty} needs a referral on file; {patient.full_name} has none for "
        f"{doctor.specialty}"
    )


def booking_problem(
    db: ClinicDB, patient: Patient, slot: Slot, moving: Appointment | None = None
) -> str | None:
    """Why ``patient`` cannot take ``slot`` (``moving``: the appointment being rescheduled,
    which does not count against the patient's other appointments)."""
    if slot.status != "free":
        return f"slot {slot.slot_id} is already booked"
    if start_of(slot.date, slot.time) <= db.current:
        return f"slot {slot.slot_id} is in the past (now is {db.now})"
    doctor = db.doctors[slot.doctor_id]
    problem = eligibility_problem(db, patient, doctor)
    if problem:
        return problem
    others = [a for a in db.upcoming(patient.patient_id) if a != moving]
    for other in others:
        if (other.date, other.time) == (slot.date, slot.time):
            return (
                f"{patient.full_name} already has appointment {other.appointment_id} on "
                f"{other.date} at {other.time}"
            )
        if other.doctor_id == slot.doctor_id:
            return (
                f"{patient.full_name} already has an upcoming appointment with {doctor.name} "
                f"({other.appointment_id}); reschedule that one instead"
            )
    return None


def change_problem(db: ClinicDB, appointment: Appointment) -> str | None:
    """Why ``appointment`` cannot be cancelled or rescheduled (status, 24 hours' notice)."""
    if appointment.status != "booked":
        return f"appointment {appointment.appointment_id} is {appointment.status}, not booked"
    start = start_of(appointment.date, appointment.time)
    if start - db.current < NOTICE:
        return (
            f"appointment {appointment.appointment_id} starts on {appointment.date} at "
            f"{appointment.time}, less than 24 hours from now ({db.now}); it cannot be changed"
        )
    return None


def waitlist_problem(db: ClinicDB, patient: Patient, doctor: Doctor, day: str) -> str | None:
    """Why ``patient`` cannot join ``doctor``'s waitlist for ``day``."""
    if day <= db.current.date().isoformat() or day not in db.working_days(doctor.doctor_id):
        return f"{doctor.name} has no working day {day} after today in the next two weeks"
    if db.free_slots(doctor.doctor_id, day):
        return f"{doctor.name} still has free slots on {day}; book one instead"
    problem = eligibility_problem(db, patient, doctor)
    if problem:
        return problem
    if any(a.doctor_id == doctor.doctor_id for a in db.upcoming(patient.patient_id)):
        return f"{patient.full_name} already has an upcoming appointment with {doctor.name}"
    entry = (patient.patient_id, doctor.doctor_id, day)
    if any((w.patient_id, w.doctor_id, w.date) == entry for w in db.waitlist):
        return f"{patient.full_name} is already on {doctor.name}'s waitlist for {day}"
    return None
