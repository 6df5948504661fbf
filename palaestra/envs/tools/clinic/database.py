"""The clinic's database: patients, doctors with weekly schedules, slots and appointments.

Drawn from a seed: a fixed "now" (a Monday, 10:00), doctors of several specialties who each
work a morning or afternoon session on a few weekdays, 30-minute slots over the next two
weeks (free or booked), patients with insurance and referrals, and their appointments
(booked, cancelled, or completed in the past).
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta
from typing import Literal

import numpy as np
import pydantic

from palaestra.envs.tools.backend import pick

FIRST_NAMES = (
    "Alice", "Ben", "Carmen", "David", "Elif", "Farah", "George", "Hana", "Isaac", "Julia",
    "Kenji", "Laura", "Marco", "Nadia", "Oscar", "Paula", "Rashid", "Sara", "Tomas", "Vera",
)  # fmt: skip
LAST_NAMES = (
    "Adler", "Baker", "Castro", "Dalton", "Evans", "Fischer", "Grant", "Hughes", "Ito", "Jonsson",
    "Keller", "Lopez", "Meyer", "Nguyen", "Ortiz", "Park", "Quinn", "Reyes", "Schmidt", "Turner",
)  # fmt: skip
DOCTOR_LAST_NAMES = (
    "Abbott", "Brennan", "Chen", "Delgado", "Eriksen", "Fontaine", "Gupta", "Hoffman", "Ibarra",
    "Kowalski", "Lindqvist", "Mbeki", "Nakamura", "Okoye",
)  # fmt: skip
SPECIALTIES = (
    "general practice", "general practice", "cardiology", "cardiology", "dermatology",
    "neurology", "orthopedics", "pediatrics",
)  # fmt: skip
"""One doctor per entry."""
REFERRAL_SPECIALTIES = ("cardiology", "neurology", "orthopedics")
PEDIATRICS = "pediatrics"
ADULT_AGE = 18
INSURERS = ("Aetna", "BlueCross", "Cigna", "Humana", "UnitedHealthcare")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SESSIONS = ("08:00-12:00", "13:00-17:00")
SLOT_MINUTES = 30
WINDOW_DAYS = 14
NOW_TIME = "10:00"
FORMAT = "%Y-%m-%d %H:%M"


class Insurance(pydantic.BaseModel):
    provider: str
    member_id: str


class Patient(pydantic.BaseModel):
    patient_id: str
    first_name: str
    last_name: str
    date_of_birth: str
    phone: str
    insurance: Insurance
    referrals: list[str]

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


class Doctor(pydantic.BaseModel):
    doctor_id: str
    name: str
    specialty: str
    schedule: dict[str, str]
    """Weekday -> working session (``"08:00-12:00"``), the same every week."""


class Slot(pydantic.BaseModel):
    slot_id: str
    doctor_id: str
    date: str
    time: str
    status: Literal["free", "booked"]


class Appointment(pydantic.BaseModel):
    appointment_id: str
    patient_id: str
    doctor_id: str
    date: str
    time: str
    status: Literal["booked", "cancelled", "completed"]


class WaitlistEntry(pydantic.BaseModel):
    patient_id: str
    doctor_id: str
    date: str


@functools.lru_cache(maxsize=4096)
def start_of(day: str, time: str) -> datetime:
    """The datetime of a slot or appointment (``"2025-03-04"``, ``"09:30"``)."""
    return datetime.strptime(f"{day} {time}", FORMAT)


def weekday(day: str) -> str:
    """``"2025-03-04"`` -> ``"Tuesday"``."""
    return WEEKDAYS[date.fromisoformat(day).weekday()]


def slot_id(doctor_id: str, day: str, time: str) -> str:
    """The id of a doctor's slot: ``"D03-2025-03-04-09:30"``."""
    return f"{doctor_id}-{day}-{time}"


class ClinicDB(pydantic.BaseModel):
    now: str
    """The current date and time (``"2025-03-03 10:00"``); it does not move."""
    patients: dict[str, Patient]
    doctors: dict[str, Doctor]
    slots: dict[str, Slot]
    appointments: dict[str, Appointment]
    waitlist: list[WaitlistEntry]

    @property
    def current(self) -> datetime:
        return start_of(*self.now.split(" "))

    def age(self, patient: Patient) -> int:
        """The patient's age in whole years today."""
        born, today = date.fromisoformat(patient.date_of_birth), self.current.date()
        return today.year - born.year - ((today.month, today.day) < (born.month, born.day))

    def free_slots(self, doctor_id: str, day: str) -> list[Slot]:
        """The doctor's free slots on ``day`` that start in the future, earliest first."""
        return sorted(
            (
                slot
                for slot in self.slots.values()
                if slot.doctor_id == doctor_id and slot.date == day and slot.status == "free"
                if start_of(slot.date, slot.time) > self.current
            ),
            key=lambda slot: slot.time,
        )

    def working_days(self, doctor_id: str) -> list[str]:
        """The dates in the booking window on which the doctor has slots."""
        return sorted({s.date for s in self.slots.values() if s.doctor_id == doctor_id})

    def upcoming(self, patient_id: str) -> list[Appointment]:
        """The patient's booked appointments that have not started, earliest first."""
        return sorted(
            (
                a
                for a in self.appointments.values()
                if a.patient_id == patient_id and a.status == "booked"
                if start_of(a.date, a.time) > self.current
            ),
            key=lambda a: (a.date, a.time),
        )

    def slot_of(self, appointment: Appointment) -> Slot:
        """The slot a booked appointment holds (booked appointments lie in the window)."""
        return self.slots[slot_id(appointment.doctor_id, appointment.date, appointment.time)]

    def next_appointment_id(self) -> str:
        return f"A{1000 + len(self.appointments)}"


def _generate_doctors(rng: np.random.Generator) -> dict[str, Doctor]:
    last_names = rng.choice(len(DOCTOR_LAST_NAMES), size=len(SPECIALTIES), replace=False)
    doctors = {}
    for number, (specialty, last) in enumerate(zip(SPECIALTIES, last_names, strict=True)):
        doctor_id = f"D{number + 1:02d}"
        days = sorted(int(d) for d in rng.choice(5, size=int(rng.integers(2, 5)), replace=False))
        doctors[doctor_id] = Doctor(
            doctor_id=doctor_id,
            name=f"Dr. {pick(rng, FIRST_NAMES)} {DOCTOR_LAST_NAMES[int(last)]}",
            specialty=specialty,
            schedule={WEEKDAYS[d]: pick(rng, SESSIONS) for d in days},
        )
    return doctors


def _generate_patients(rng: np.random.Generator, count: int, today: date) -> dict[str, Patient]:
    names = rng.choice(len(FIRST_NAMES) * len(LAST_NAMES), size=count, replace=False)
    patients = {}
    for number, name in enumerate(names):
        first, last = divmod(int(name), len(LAST_NAMES))
        child = rng.random() < 0.2
        age_days = int(
            rng.integers(2 * 365, 17 * 365) if child else rng.integers(19 * 365, 85 * 365)
        )
        provider = pick(rng, INSURERS)
        patients[f"P{1000 + number}"] = Patient(
            patient_id=f"P{1000 + number}",
            first_name=FIRST_NAMES[first],
            last_name=LAST_NAMES[last],
            date_of_birth=(today - timedelta(days=age_days)).isoformat(),
            phone=random_phone(rng),
            insurance=Insurance(provider=provider, member_id=random_member_id(rng, provider)),
            referrals=[s for s in REFERRAL_SPECIALTIES if rng.random() < 0.35],
        )
    return patients


def random_phone(rng: np.random.Generator) -> str:
    area = pick(rng, ("206", "312", "512", "617", "720"))
    return f"{area}-555-{int(rng.integers(0, 10000)):04d}"


def random_member_id(rng: np.random.Generator, provider: str) -> str:
    return f"{provider[:3].upper()}{int(rng.integers(0, 1_000_000)):06d}"


@functools.lru_cache(maxsize=16)
def session_times(session: str) -> tuple[str, ...]:
    """The slot start times of a session: ``"08:00-09:00"`` -> ``("08:00", "08:30")``."""
    first, last = (datetime.strptime(part, "%H:%M") for part in session.split("-"))
    step = timedelta(minutes=SLOT_MINUTES)
    count = int((last - first) / step)
    return tuple((first + i * step).strftime("%H:%M") for i in range(count))


def _generate_slots(doctors: dict[str, Doctor], today: date) -> dict[str, Slot]:
    slots = {}
    for doctor in doctors.values():
        for offset in range(WINDOW_DAYS):
            day = today + timedelta(days=offset)
            session = doctor.schedule.get(WEEKDAYS[day.weekday()])
            for time in session_times(session) if session else []:
                key = slot_id(doctor.doctor_id, day.isoformat(), time)
                slots[key] = Slot(
                    slot_id=key,
                    doctor_id=doctor.doctor_id,
                    date=day.isoformat(),
                    time=time,
                    status="free",
                )
    return slots


def eligible(db: ClinicDB, patient: Patient, doctor: Doctor) -> bool:
    """Whether the patient may see the doctor (referral and age rules)."""
    if doctor.specialty in REFERRAL_SPECIALTIES and doctor.specialty not in patient.referrals:
        return False
    return doctor.specialty != PEDIATRICS or db.age(patient) < ADULT_AGE


def _add(db: ClinicDB, patient: Patient, doctor: Doctor, day: str, time: str, status: str) -> None:
    key = db.next_appointment_id()
    db.appointments[key] = Appointment(
        appointment_id=key,
        patient_id=patient.patient_id,
        doctor_id=doctor.doctor_id,
        date=day,
        time=time,
        status=status,
    )


def _book_slots(db: ClinicDB, rng: np.random.Generator) -> None:
    """Fill each doctor-day to a drawn level with patients the policy allows (no clash, one
    upcoming appointment per doctor) from about half of the doctor's possible patients, so
    that others can still book; slots before now hold completed appointments."""
    times: dict[str, set[str]] = {p: set() for p in db.patients}
    doctors: dict[str, set[str]] = {p: set() for p in db.patients}
    for doctor in db.doctors.values():
        allowed = [
            p for p in db.patients.values() if eligible(db, p, doctor) and rng.random() < 0.5
        ]
        for day in db.working_days(doctor.doctor_id):
            fill = pick(rng, (0.0, 0.3, 0.6, 1.0))
            for time in session_times(doctor.schedule[weekday(day)]):
                if rng.random() >= fill:
                    continue
                past = start_of(day, time) <= db.current
                candidates = [
                    p
                    for p in allowed
                    if f"{day} {time}" not in times[p.patient_id]
                    and (past or doctor.doctor_id not in doctors[p.patient_id])
                ]
                if not candidates:
                    continue
                patient = pick(rng, candidates)
                _add(db, patient, doctor, day, time, "completed" if past else "booked")
                db.slots[slot_id(doctor.doctor_id, day, time)].status = "booked"
                times[patient.patient_id].add(f"{day} {time}")
                if not past:
                    doctors[patient.patient_id].add(doctor.doctor_id)


def _add_cancellations(db: ClinicDB, rng: np.random.Generator) -> None:
    """Cancelled appointments on some free future slots."""
    for slot in list(db.slots.values()):
        future = start_of(slot.date, slot.time) > db.current
        if slot.status == "free" and future and rng.random() < 0.05:
            doctor = db.doctors[slot.doctor_id]
            patients = [p for p in db.patients.values() if eligible(db, p, doctor)]
            if patients:
                _add(db, pick(rng, patients), doctor, slot.date, slot.time, "cancelled")


def _add_history(db: ClinicDB, rng: np.random.Generator) -> None:
    """Zero to two completed visits per patient in the eight weeks before today."""
    today = db.current.date()
    for patient in db.patients.values():
        for _ in range(int(rng.integers(0, 3))):
            doctor = pick(rng, [d for d in db.doctors.values() if eligible(db, patient, d)])
            weekday_name = pick(rng, sorted(doctor.schedule, key=WEEKDAYS.index))
            day = (
                today
                - timedelta(weeks=int(rng.integers(1, 9)))
                + timedelta(days=WEEKDAYS.index(weekday_name))
            )
            time = pick(rng, session_times(doctor.schedule[weekday_name]))
            _add(db, patient, doctor, day.isoformat(), time, "completed")


def generate_clinic(rng: np.random.Generator, patients: int = 40) -> ClinicDB:
    """A clinic with ``patients`` patients and eight doctors, two weeks of slots from now."""
    today = date(2025, 1, 6) + timedelta(weeks=int(rng.integers(0, 100)))  # a Monday
    doctors = _generate_doctors(rng)
    db = ClinicDB(
        now=f"{today.isoformat()} {NOW_TIME}",
        patients=_generate_patients(rng, patients, today),
        doctors=doctors,
        slots=_generate_slots(doctors, today),
        appointments={},
        waitlist=[],
    )
    _add_history(db, rng)
    _book_slots(db, rng)
    _add_cancellations(db, rng)
    return db
