"""The clinic's tools: patient identification, doctors and slots, appointments, waitlists,
contact and insurance details.

The tools enforce the policy (see :mod:`palaestra.envs.tools.clinic.rules`): the patient is
identified by full name and date of birth first (three failed attempts lock identification);
bookings take free future slots, with no two appointments at once and at most one upcoming
appointment per doctor; some specialties need a referral or an age; cancelling and
rescheduling need 24 hours' notice; the waitlist is for days with no free slot. Graded
beside: a day's free slots are looked up before one is booked (:meth:`Clinic.policy_checks`,
so slot ids are not guessed from their pattern), and the time and doctor of every booked or
moved appointment are told (registered with :meth:`~Backend.tell`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import Any, Literal

from palaestra.core.tool_calls import ToolCall
from palaestra.envs.tools.backend import Backend, call, require, tool
from palaestra.envs.tools.checks import ActionCheck, Before
from palaestra.envs.tools.clinic.database import (
    Appointment,
    ClinicDB,
    Doctor,
    Insurance,
    Patient,
    Slot,
    WaitlistEntry,
    generate_clinic,
    weekday,
)
from palaestra.envs.tools.clinic.rules import (
    booking_problem,
    change_problem,
    waitlist_problem,
)
from palaestra.envs.tools.clinic.tasks import TOPICS, VOCABULARY, clinic_task
from palaestra.envs.tools.facts import DOCTOR, name_fact, time_fact
from palaestra.tools import ToolError

POLICY = """
- Identify the patient before anything else: find_patient with their full name and date of
  birth (YYYY-MM-DD); three failed attempts end identification for the conversation. Before
  that, only doctors, their schedules and free slots may be looked up. Only read or change
  the identified patient's records.
- Appointments are 30-minute slots in the doctors' weekly schedules, bookable over the next
  two weeks. Book only free slots that start in the future, and look up the doctor's free
  slots on that day (find_available_slots) before booking or moving an appointment there. A patient cannot have two
  appointments at the same time, nor more than one upcoming appointment with the same doctor.
- Cardiology, neurology and orthopedics need a referral for that specialty on the patient's
  file. Pediatrics sees only patients under 18. Other specialties are open to every patient.
- Booked appointments can be cancelled or rescheduled only at least 24 hours before they
  start; closer to the start, nothing can be changed.
- Rescheduling moves an appointment to another free future slot of the same doctor and frees
  the old slot. To move an appointment, reschedule it; do not cancel it and book a new one.
  To change doctor, cancel and book.
- When a doctor has no free slot on a later day the patient wants, the patient can join that
  doctor's waitlist for that day (once; the referral and age rules apply, and not while they
  have an upcoming appointment with that doctor). Do not waitlist when a slot is free.
- Phone numbers are written like 512-555-0147. Insurance providers: Aetna, BlueCross, Cigna,
  Humana, UnitedHealthcare; member IDs are three capital letters and six digits (CIG123456).
- Dates are YYYY-MM-DD and times HH:MM (24-hour, the clinic's local time); get_current_time
  gives the current date and time.
- Tell the patient the time (HH:MM, as the tools show it) and the doctor's full name of every
  appointment you book or move.
- When the policy does not allow a request, change nothing and tell the patient why.
"""

SLOT_ARGUMENT = {"book_appointment": "slot_id", "reschedule_appointment": "new_slot_id"}
"""The argument naming the slot, of the tools that take one."""
PHONE = re.compile(r"\d{3}-\d{3}-\d{4}")
MEMBER_ID = re.compile(r"[A-Z]{3}\d{6}")


class Clinic(Backend):
    """A clinic's appointment desk (see the module docstring)."""

    name = "clinic"
    company = "a medical clinic"
    policy = POLICY
    database_type = ClinicDB
    vocabulary = VOCABULARY
    topics = TOPICS
    identity_key = "patient_id"
    generate = staticmethod(generate_clinic)
    generate_task = staticmethod(clinic_task)
    db: ClinicDB

    # -- session ---------------------------------------------------------------------------

    def _identified(self) -> Patient:
        patient_id = self.session.get("patient_id")
        require(patient_id is not None, "identify the patient first with find_patient")
        return self.db.patients[patient_id]

    def _patient(self, patient_id: str) -> Patient:
        """The identified patient, who must be ``patient_id``."""
        patient = self._identified()
        require(
            patient_id == patient.patient_id,
            f"{patient_id!r} is not the identified patient ({patient.patient_id})",
        )
        return patient

    def _own_appointment(self, appointment_id: str) -> tuple[Patient, Appointment]:
        patient = self._identified()
        appointment = self.db.appointments.get(appointment_id)
        require(
            appointment is not None, f"no appointment {appointment_id!r} (ids look like 'A1000')"
        )
        require(
            appointment.patient_id == patient.patient_id,
            f"appointment {appointment_id} belongs to another patient",
        )
        return patient, appointment

    def _doctor(self, doctor_id: str) -> Doctor:
        doctor = self.db.doctors.get(doctor_id)
        require(doctor is not None, f"no doctor {doctor_id!r}; see list_doctors")
        return doctor

    def _slot(self, slot_id: str) -> Slot:
        slot = self.db.slots.get(slot_id)
        require(slot is not None, f"no slot {slot_id!r}; see find_available_slots")
        return slot

    def _describe(self, appointment: Appointment) -> dict[str, Any]:
        doctor = self.db.doctors[appointment.doctor_id]
        return {
            **appointment.model_dump(exclude={"patient_id"}),
            "weekday": weekday(appointment.date),
            "doctor": doctor.name,
            "specialty": doctor.specialty,
        }

    def _tell_appointment(self, appointment: Appointment) -> None:
        """The policy's facts of a booked or moved appointment: its time and doctor."""
        doctor = self.db.doctors[appointment.doctor_id]
        full_name = doctor.name.removeprefix("Dr. ")
        self.tell(time_fact(appointment.time, f"the time of {appointment.appointment_id}"))
        self.tell(name_fact(DOCTOR, full_name, "the doctor's full name", text=doctor.name))

    def policy_checks(self, actions: Sequence[ToolCall]) -> tuple[ActionCheck, ...]:
        """A slot is booked or moved to only after its day's free slots were looked up."""
        checks = []
        for action in actions:
            key = SLOT_ARGUMENT.get(action.name)
            if key is None:
                continue
            slot = self.db.slots[action.arguments[key]]
            look_up = call("find_available_slots", doctor_id=slot.doctor_id, date=slot.date)
            checks.append(Before(look_up, call(action.name, **{key: slot.slot_id})))
        return tuple(checks)

    # -- tools -----------------------------------------------------------------------------

    @tool
    def get_current_time(self) -> str:
        """The current date and time at the clinic."""
        return f"{weekday(self.db.now[:10])} {self.db.now}"

    @tool
    def find_patient(self, full_name: str, date_of_birth: str) -> str:
        """Find a patient's id by full name and date of birth, identifying them.

        Args:
            full_name: the patient's first and last name
            date_of_birth: YYYY-MM-DD
        """
        self.check_identity_attempts()
        wanted = (" ".join(full_name.lower().split()), date_of_birth.strip())
        for patient in self.db.patients.values():
            if (patient.full_name.lower(), patient.date_of_birth) == wanted:
                self.session["patient_id"] = patient.patient_id
                return patient.patient_id
        raise self.identity_failed("no patient with that name and date of birth")

    @tool
    def get_patient(self, patient_id: str) -> Patient:
        """The identified patient's file: contact, insurance and referrals.

        Args:
            patient_id: the id from find_patient
        """
        return self._patient(patient_id)

    @tool
    def list_doctors(self, specialty: str | None = None) -> list[dict[str, Any]]:
        """The clinic's doctors with their specialty and weekly schedule.

        Args:
            specialty: only doctors of this specialty (e.g. 'cardiology'); all when omitted
        """
        doctors = list(self.db.doctors.values())
        if specialty is not None:
            known = sorted({d.specialty for d in doctors})
            require(
                specialty.strip().lower() in known,
                f"no specialty {specialty!r}; the clinic's: {known}",
            )
            doctors = [d for d in doctors if d.specialty == specialty.strip().lower()]
        return [d.model_dump() for d in doctors]

    @tool
    def find_available_slots(self, doctor_id: str, date: str) -> list[dict[str, str]] | str:
        """A doctor's free slots on a date that start in the future, earliest first.

        Args:
            doctor_id: the doctor's id, such as 'D01'
            date: YYYY-MM-DD
        """
        doctor = self._doctor(doctor_id)
        day = _parse_date(date)
        if day not in self.db.working_days(doctor_id):
            return f"{doctor.name} has no slots on {day} (works {', '.join(doctor.schedule)})"
        slots = self.db.free_slots(doctor_id, day)
        if not slots:
            return f"{doctor.name} has no free slot left on {weekday(day)} {day}"
        return [{"slot_id": s.slot_id, "date": s.date, "time": s.time} for s in slots]

    @tool
    def list_appointments(self, patient_id: str) -> list[dict[str, Any]]:
        """The identified patient's appointments (booked, cancelled, completed).

        Args:
            patient_id: the id from find_patient
        """
        patient = self._patient(patient_id)
        mine = [a for a in self.db.appointments.values() if a.patient_id == patient.patient_id]
        return [self._describe(a) for a in sorted(mine, key=lambda a: (a.date, a.time))]

    @tool(writes=True)
    def book_appointment(self, patient_id: str, slot_id: str) -> dict[str, Any]:
        """Book a free future slot for the identified patient.

        Args:
            patient_id: the id from find_patient
            slot_id: a slot id from find_available_slots
        """
        patient = self._patient(patient_id)
        slot = self._slot(slot_id)
        problem = booking_problem(self.db, patient, slot)
        require(problem is None, problem or "")
        appointment = Appointment(
            appointment_id=self.db.next_appointment_id(),
            patient_id=patient.patient_id,
            doctor_id=slot.doctor_id,
            date=slot.date,
            time=slot.time,
            status="booked",
        )
        self.db.appointments[appointment.appointment_id] = appointment
        slot.status = "booked"
        self._tell_appointment(appointment)
        return self._describe(appointment)

    @tool(writes=True)
    def cancel_appointment(self, appointment_id: str) -> str:
        """Cancel a booked appointment at least 24 hours before it starts; frees its slot.

        Args:
            appointment_id: the appointment id, such as 'A1000'
        """
        _, appointment = self._own_appointment(appointment_id)
        problem = change_problem(self.db, appointment)
        require(problem is None, problem or "")
        appointment.status = "cancelled"
        self.db.slot_of(appointment).status = "free"
        return f"appointment {appointment_id} on {appointment.date} at {appointment.time} cancelled"

    @tool(writes=True)
    def reschedule_appointment(self, appointment_id: str, new_slot_id: str) -> dict[str, Any]:
        """Move a booked appointment to another free future slot of the same doctor, at least
        24 hours before the old one starts; frees the old slot.

        Args:
            appointment_id: the appointment id
            new_slot_id: a free slot of the same doctor, from find_available_slots
        """
        patient, appointment = self._own_appointment(appointment_id)
        problem = change_problem(self.db, appointment)
        require(problem is None, problem or "")
        slot = self._slot(new_slot_id)
        require(
            slot.doctor_id == appointment.doctor_id,
            f"{new_slot_id} is another doctor's slot; reschedule only with the same doctor "
            "(to change doctor, cancel and book)",
        )
        problem = booking_problem(self.db, patient, slot, moving=appointment)
        require(problem is None, problem or "")
        self.db.slot_of(appointment).status = "free"
        appointment.date, appointment.time = slot.date, slot.time
        slot.status = "booked"
        self._tell_appointment(appointment)
        return self._describe(appointment)

    @tool(writes=True)
    def join_waitlist(self, patient_id: str, doctor_id: str, date: str) -> str:
        """Put the identified patient on a doctor's waitlist for a day with no free slot.

        Args:
            patient_id: the id from find_patient
            doctor_id: the doctor's id
            date: YYYY-MM-DD
        """
        patient = self._patient(patient_id)
        doctor = self._doctor(doctor_id)
        day = _parse_date(date)
        problem = waitlist_problem(self.db, patient, doctor, day)
        require(problem is None, problem or "")
        self.db.waitlist.append(
            WaitlistEntry(patient_id=patient.patient_id, doctor_id=doctor_id, date=day)
        )
        return f"{patient.full_name} is on {doctor.name}'s waitlist for {weekday(day)} {day}"

    @tool(writes=True)
    def update_phone(self, patient_id: str, phone: str) -> Patient:
        """Change the identified patient's phone number.

        Args:
            patient_id: the id from find_patient
            phone: the new number, like 512-555-0147
        """
        patient = self._patient(patient_id)
        phone = phone.strip()
        require(bool(PHONE.fullmatch(phone)), f"phone {phone!r} is not like 512-555-0147")
        patient.phone = phone
        return patient

    @tool(writes=True)
    def update_insurance(
        self,
        patient_id: str,
        provider: Literal["Aetna", "BlueCross", "Cigna", "Humana", "UnitedHealthcare"],
        member_id: str,
    ) -> Patient:
        """Replace the identified patient's insurance.

        Args:
            patient_id: the id from find_patient
            provider: the insurance provider
            member_id: three capital letters and six digits, like CIG123456
        """
        patient = self._patient(patient_id)
        member_id = member_id.strip().upper()
        require(
            bool(MEMBER_ID.fullmatch(member_id)),
            f"member id {member_id!r} is not three letters and six digits",
        )
        patient.insurance = Insurance(provider=provider, member_id=member_id)
        return patient


def _parse_date(text: str) -> str:
    try:
        return date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise ToolError(f"date {text!r} is not YYYY-MM-DD") from None
