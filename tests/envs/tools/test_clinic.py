"""The clinic domain: the oracle solves every level, the tools enforce each policy, and only
the reference end state counts."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

import palaestra
from palaestra.envs.tools.backend import call, state_hash
from palaestra.envs.tools.clinic import Clinic
from palaestra.envs.tools.clinic.database import ClinicDB, Patient, Slot, start_of
from palaestra.envs.tools.clinic.rules import booking_problem
from palaestra.envs.tools.env import ToolUseEnv

VARIANTS = ("tools:Clinic-Easy-v0", "tools:Clinic-v0", "tools:Clinic-Hard-v0")


class Desk:
    """A clinic backend on a fresh copy of ``db``, called through its tools as an agent would."""

    def __init__(self, db: ClinicDB):
        self.backend = Clinic()
        self.backend.load(db)
        self.tools = {tool.name: tool for tool in self.backend.tools()}

    @property
    def db(self) -> ClinicDB:
        return self.backend.db

    def run(self, name: str, **arguments: object) -> str:
        output = self.tools[name].call(arguments)
        assert not output.startswith("error:"), output
        return output

    def refuses(self, name: str, **arguments: object) -> str:
        """The call's error message; asserts the database did not change."""
        before = state_hash(self.db)
        output = self.tools[name].call(arguments)
        assert output.startswith("error:"), output
        assert state_hash(self.db) == before
        return output

    def identify(self, patient: Patient) -> None:
        assert self.run("find_patient", full_name=patient.full_name,
                        date_of_birth=patient.date_of_birth) == patient.patient_id  # fmt: skip


@pytest.fixture(scope="module")
def db() -> ClinicDB:
    return Clinic.generate(np.random.default_rng(0))


@pytest.fixture
def desk(db: ClinicDB) -> Desk:
    return Desk(db)


def future_free(db: ClinicDB) -> list[Slot]:
    return [
        s for s in db.slots.values() if s.status == "free" and start_of(s.date, s.time) > db.current
    ]


def slot_and_patient(db: ClinicDB, specialty: str | None = None) -> tuple[Slot, Patient]:
    """A free future slot and a patient who may book it."""
    for slot in future_free(db):
        if specialty and db.doctors[slot.doctor_id].specialty != specialty:
            continue
        for patient in db.patients.values():
            if booking_problem(db, patient, slot) is None:
                return slot, patient
    raise AssertionError("the test database has no bookable slot")


def appointment_with(db: ClinicDB, status: str, notice: bool = True) -> tuple[Patient, str]:
    """A patient and one of their appointments in ``status`` (booked ones at least a day away
    unless ``notice`` is False)."""
    for appointment in db.appointments.values():
        far = start_of(appointment.date, appointment.time) - db.current >= timedelta(days=1)
        if appointment.status == status and (status != "booked" or far == notice):
            return db.patients[appointment.patient_id], appointment.appointment_id
    raise AssertionError(f"the test database has no {status} appointment")


def play_oracle(env: palaestra.Env, seed: int, **options: object) -> float:
    observation, _ = env.reset(seed=seed, options=options or None)
    policy = env.oracle()
    while True:
        observation, reward, terminated, truncated, _ = env.step(policy(observation))
        if terminated or truncated:
            return reward


# -- the oracle and the task generator -----------------------------------------------------


@pytest.mark.slow  # the default run plays the oracle on fewer seeds (test_attacks.py)
@pytest.mark.parametrize("variant", VARIANTS)
def test_oracle_solves_a_hundred_seeds(variant: str) -> None:
    env = palaestra.make(variant)
    for seed in range(100):
        reward = play_oracle(env, seed)
        assert reward == 1.0, (seed, env.unwrapped.task, env.unwrapped.mismatch())


def test_same_seed_same_task_and_database() -> None:
    first, second = palaestra.make("tools:Clinic-Hard-v0"), palaestra.make("tools:Clinic-Hard-v0")
    assert first.reset(seed=7) == second.reset(seed=7)
    assert first.unwrapped.task == second.unwrapped.task
    assert state_hash(Clinic.generate(np.random.default_rng(3))) == state_hash(
        Clinic.generate(np.random.default_rng(3))
    )
    assert state_hash(Clinic.generate(np.random.default_rng(4))) != state_hash(
        Clinic.generate(np.random.default_rng(3))
    )


def test_generated_database_follows_the_policy(db: ClinicDB) -> None:
    """No patient is booked twice at once or twice with one doctor, and booked slots match the
    booked appointments."""
    upcoming = [a for p in db.patients for a in db.upcoming(p)]
    assert len({(a.patient_id, a.date, a.time) for a in upcoming}) == len(upcoming)
    assert len({(a.patient_id, a.doctor_id) for a in upcoming}) == len(upcoming)
    held = {db.slot_of(a).slot_id for a in db.appointments.values() if a.status == "booked"}
    future_booked = {
        s.slot_id
        for s in db.slots.values()
        if s.status == "booked" and start_of(s.date, s.time) > db.current
    }
    assert held == future_booked
    assert {a.status for a in db.appointments.values()} == {"booked", "cancelled", "completed"}


def test_hard_tasks_need_what_only_the_patient_knows() -> None:
    env = palaestra.make("tools:Clinic-Hard-v0")
    for seed in range(20):
        request, _ = env.reset(seed=seed)
        task = env.unwrapped.task
        patient = task.actions[0].arguments
        assert patient["full_name"] not in request and patient["date_of_birth"] not in request
        assert len(task.facts) >= 3
        reply, *_ = env.step("Hello! How can I help?")
        assert patient["date_of_birth"] not in reply
        reply, *_ = env.step("What is your full name and date of birth?")
        assert patient["full_name"] in reply and patient["date_of_birth"] in reply


# -- policies ------------------------------------------------------------------------------


def test_nothing_about_a_patient_before_identification(desk: Desk, db: ClinicDB) -> None:
    slot, patient = slot_and_patient(db)
    pid = patient.patient_id
    for name, arguments in (
        ("get_patient", {"patient_id": pid}),
        ("list_appointments", {"patient_id": pid}),
        ("book_appointment", {"patient_id": pid, "slot_id": slot.slot_id}),
        ("update_phone", {"patient_id": pid, "phone": "512-555-0000"}),
        ("cancel_appointment", {"appointment_id": "A1000"}),
        ("reschedule_appointment", {"appointment_id": "A1000", "new_slot_id": slot.slot_id}),
        ("join_waitlist", {"patient_id": pid, "doctor_id": "D01", "date": slot.date}),
        ("update_insurance", {"patient_id": pid, "provider": "Cigna", "member_id": "CIG123456"}),
    ):
        assert "identify the patient first" in desk.refuses(name, **arguments)
    assert "no patient" in desk.refuses(
        "find_patient", full_name=patient.full_name, date_of_birth="1900-01-01"
    )
    assert desk.run("list_doctors", specialty="cardiology").count("cardiology") >= 2
    assert slot.slot_id in desk.run(
        "find_available_slots", doctor_id=slot.doctor_id, date=slot.date
    )


def test_only_the_identified_patients_records(desk: Desk, db: ClinicDB) -> None:
    owner, appointment_id = appointment_with(db, "booked")
    other = next(p for p in db.patients.values() if p.patient_id != owner.patient_id)
    desk.identify(other)
    assert "not the identified patient" in desk.refuses("get_patient", patient_id=owner.patient_id)
    assert "another patient" in desk.refuses("cancel_appointment", appointment_id=appointment_id)


def test_only_free_future_slots(db: ClinicDB) -> None:
    past = next(s for s in db.slots.values() if start_of(s.date, s.time) <= db.current)
    earlier = db.model_copy(deep=True)
    earlier.slots[past.slot_id].status = "free"
    desk = Desk(earlier)
    patient = next(iter(db.patients.values()))
    desk.identify(patient)
    booked = next(s for s in db.slots.values() if s.status == "booked")
    assert "already booked" in desk.refuses(
        "book_appointment", patient_id=patient.patient_id, slot_id=booked.slot_id
    )
    assert "in the past" in desk.refuses(
        "book_appointment", patient_id=patient.patient_id, slot_id=past.slot_id
    )
    assert "no slot" in desk.refuses(
        "book_appointment", patient_id=patient.patient_id, slot_id="D01-1999-01-01-08:00"
    )


def test_no_two_appointments_at_the_same_time(desk: Desk, db: ClinicDB) -> None:
    free = future_free(db)
    for first in free:
        for second in free:
            if (second.date, second.time) != (first.date, first.time) or second is first:
                continue
            patients = [
                p
                for p in db.patients.values()
                if booking_problem(db, p, first) is None and booking_problem(db, p, second) is None
            ]
            if patients:
                desk.identify(patients[0])
                desk.run(
                    "book_appointment", patient_id=patients[0].patient_id, slot_id=first.slot_id
                )
                message = desk.refuses(
                    "book_appointment", patient_id=patients[0].patient_id, slot_id=second.slot_id
                )
                assert "already has appointment" in message
                return
    raise AssertionError("no two free slots at the same time in the test database")


def test_one_upcoming_appointment_per_doctor(desk: Desk, db: ClinicDB) -> None:
    for patient in db.patients.values():
        for appointment in db.upcoming(patient.patient_id):
            for slot in future_free(db):
                if slot.doctor_id == appointment.doctor_id and slot.date != appointment.date:
                    desk.identify(patient)
                    message = desk.refuses(
                        "book_appointment", patient_id=patient.patient_id, slot_id=slot.slot_id
                    )
                    assert "already has an upcoming appointment" in message
                    return
    raise AssertionError("no patient with a doctor who has another free slot")


def test_referral_and_age_rules(desk: Desk, db: ClinicDB) -> None:
    cardiology = next(
        s for s in future_free(db) if db.doctors[s.doctor_id].specialty == "cardiology"
    )
    no_referral = next(p for p in db.patients.values() if "cardiology" not in p.referrals)
    desk.identify(no_referral)
    assert "referral" in desk.refuses(
        "book_appointment", patient_id=no_referral.patient_id, slot_id=cardiology.slot_id
    )
    pediatrics = next(
        s for s in future_free(db) if db.doctors[s.doctor_id].specialty == "pediatrics"
    )
    adult = next(p for p in db.patients.values() if db.age(p) >= 18)
    desk.identify(adult)
    assert "under 18" in desk.refuses(
        "book_appointment", patient_id=adult.patient_id, slot_id=pediatrics.slot_id
    )
    slot, child = slot_and_patient(db, "pediatrics")
    assert db.age(child) < 18
    desk.identify(child)
    desk.run("book_appointment", patient_id=child.patient_id, slot_id=slot.slot_id)


def test_cancel_only_booked_with_a_days_notice(desk: Desk, db: ClinicDB) -> None:
    patient, cancelled = appointment_with(db, "cancelled")
    desk.identify(patient)
    assert "not booked" in desk.refuses("cancel_appointment", appointment_id=cancelled)
    patient, completed = appointment_with(db, "completed")
    desk.identify(patient)
    assert "not booked" in desk.refuses("cancel_appointment", appointment_id=completed)
    soon = next(
        s for s in future_free(db) if start_of(s.date, s.time) - db.current < timedelta(hours=24)
    )
    patient = next(p for p in db.patients.values() if booking_problem(db, p, soon) is None)
    desk.identify(patient)
    booked = desk.run("book_appointment", patient_id=patient.patient_id, slot_id=soon.slot_id)
    appointment_id = booked.split('"appointment_id": "')[1].split('"')[0]
    assert "less than 24 hours" in desk.refuses("cancel_appointment", appointment_id=appointment_id)
    assert "less than 24 hours" in desk.refuses(
        "reschedule_appointment", appointment_id=appointment_id, new_slot_id=soon.slot_id
    )


def test_cancel_frees_the_slot(desk: Desk, db: ClinicDB) -> None:
    patient, appointment_id = appointment_with(db, "booked")
    desk.identify(patient)
    desk.run("cancel_appointment", appointment_id=appointment_id)
    appointment = desk.db.appointments[appointment_id]
    assert appointment.status == "cancelled"
    assert desk.db.slot_of(appointment).status == "free"


def test_reschedule_same_doctor_free_slot_and_frees_the_old(desk: Desk, db: ClinicDB) -> None:
    for patient in db.patients.values():
        for appointment in db.upcoming(patient.patient_id):
            far = start_of(appointment.date, appointment.time) - db.current >= timedelta(days=1)
            free = [
                s
                for s in future_free(db)
                if s.doctor_id == appointment.doctor_id
                and booking_problem(db, patient, s, moving=appointment) is None
            ]
            others = [s for s in future_free(db) if s.doctor_id != appointment.doctor_id]
            taken = [
                s
                for s in db.slots.values()
                if s.doctor_id == appointment.doctor_id and s.status == "booked"
                and s.slot_id != db.slot_of(appointment).slot_id
            ]  # fmt: skip
            if not (far and free and others and taken):
                continue
            desk.identify(patient)
            aid = appointment.appointment_id
            assert "same doctor" in desk.refuses(
                "reschedule_appointment", appointment_id=aid, new_slot_id=others[0].slot_id
            )
            assert "already booked" in desk.refuses(
                "reschedule_appointment", appointment_id=aid, new_slot_id=taken[0].slot_id
            )
            old = db.slot_of(appointment).slot_id
            desk.run("reschedule_appointment", appointment_id=aid, new_slot_id=free[0].slot_id)
            moved = desk.db.appointments[aid]
            assert (moved.date, moved.time, moved.status) == (free[0].date, free[0].time, "booked")
            assert desk.db.slots[old].status == "free"
            assert desk.db.slots[free[0].slot_id].status == "booked"
            assert len(desk.db.appointments) == len(db.appointments)
            return
    raise AssertionError("no appointment to reschedule in the test database")


def test_waitlist_only_for_full_days_and_once(desk: Desk, db: ClinicDB) -> None:
    slot, patient = slot_and_patient(db)
    desk.identify(patient)
    assert "still has free slots" in desk.refuses(
        "join_waitlist", patient_id=patient.patient_id, doctor_id=slot.doctor_id, date=slot.date
    )
    assert "no working day" in desk.refuses(
        "join_waitlist", patient_id=patient.patient_id, doctor_id=slot.doctor_id,
        date=db.now[:10],
    )  # fmt: skip
    inner = reset_until(palaestra.make("tools:Clinic-v0"), 2, "join_waitlist")
    episode = Desk(inner.backend.db)
    identify, join = inner.task.actions
    episode.run(identify.name, **identify.arguments)
    episode.run(join.name, **join.arguments)
    assert len(episode.db.waitlist) == 1
    assert "already on" in episode.refuses(join.name, **join.arguments)


def test_contact_and_insurance_formats(desk: Desk, db: ClinicDB) -> None:
    patient = next(iter(db.patients.values()))
    desk.identify(patient)
    pid = patient.patient_id
    assert "not like" in desk.refuses("update_phone", patient_id=pid, phone="5125550147")
    assert "six digits" in desk.refuses(
        "update_insurance", patient_id=pid, provider="Cigna", member_id="12345"
    )
    assert "provider" in desk.refuses(
        "update_insurance", patient_id=pid, provider="Acme", member_id="ACM123456"
    )
    desk.run("update_insurance", patient_id=pid, provider="Cigna", member_id="cig123456")
    assert desk.db.patients[pid].insurance.member_id == "CIG123456"


def test_bad_arguments_are_refused_not_raised(desk: Desk) -> None:
    assert "YYYY-MM-DD" in desk.refuses("find_available_slots", doctor_id="D01", date="tomorrow")
    assert "no doctor" in desk.refuses("find_available_slots", doctor_id="D99", date="2025-01-01")
    assert "no specialty" in desk.refuses("list_doctors", specialty="astrology")
    assert "missing argument" in desk.refuses("book_appointment", slot_id="x")


# -- grading: only the reference end state --------------------------------------------------


def reset_until(env: palaestra.Env, level: int, tool_name: str) -> ToolUseEnv:
    for seed in range(200):
        env.reset(seed=seed, options={"level": level})
        if env.unwrapped.task.actions[-1].name == tool_name:
            return env.unwrapped
    raise AssertionError(f"no level-{level} task ending in {tool_name}")


def apply(inner: ToolUseEnv, actions: tuple) -> None:
    """Run ``actions`` on the episode's database, as the agent's tool calls would."""
    tools = {tool.name: tool for tool in inner.backend.tools()}
    for action in actions:
        output = tools[action.name].call(action.arguments)
        assert not output.startswith("error:"), output


def test_wrong_time_or_an_extra_booking_is_not_done() -> None:
    inner = reset_until(palaestra.make("tools:Clinic-v0"), 2, "book_appointment")
    *before, book = inner.task.actions
    start = inner.backend.db.model_copy(deep=True)
    patient = start.patients[book.arguments["patient_id"]]
    wanted = start.slots[book.arguments["slot_id"]]
    wrong = next(
        s
        for s in future_free(start)
        if s.doctor_id == wanted.doctor_id and s.slot_id != wanted.slot_id
        and booking_problem(start, patient, s) is None
    )  # fmt: skip
    apply(
        inner, (*before, call("book_appointment", **{**book.arguments, "slot_id": wrong.slot_id}))
    )
    assert not inner.progress().database_done
    inner.backend.load(start)
    apply(inner, inner.task.actions)
    assert inner.progress().database_done and not inner.progress().reported
    extra = next(s for s in future_free(inner.backend.db)
                 if booking_problem(inner.backend.db, patient, s) is None)  # fmt: skip
    apply(inner, (call("book_appointment", patient_id=patient.patient_id, slot_id=extra.slot_id),))
    assert not inner.progress().database_done


def test_cancel_and_book_is_not_a_reschedule() -> None:
    env = palaestra.make("tools:Clinic-v0")
    inner = reset_until(env, 2, "reschedule_appointment")
    identify, move = inner.task.actions
    appointment_id = move.arguments["appointment_id"]
    patient_id = inner.backend.db.appointments[appointment_id].patient_id
    apply(inner, (
        identify,
        call("cancel_appointment", appointment_id=appointment_id),
        call("book_appointment", patient_id=patient_id, slot_id=move.arguments["new_slot_id"]),
    ))  # fmt: skip
    assert not inner.progress().database_done
    inner.backend.load(inner.backend.db)  # the session is new; the database keeps the moves
    assert inner.backend.db.slots[move.arguments["new_slot_id"]].status == "booked"


def test_garbage_actions_do_not_raise() -> None:
    env = palaestra.make("tools:Clinic-v0")
    env.reset(seed=0)
    for action in (
        "",
        "<tool_call>{oops</tool_call>",
        '<tool_call>{"name": "book_appointment", "arguments": {"slot_id": 5}}</tool_call>',
        '<tool_call>{"name": "find_patient", "arguments": []}</tool_call>',
        '<tool_call>{"name": "drop_tables", "arguments": {}}</tool_call>',
        "x" * 100_000,
    ):
        observation, reward, terminated, truncated, _ = env.step(action)
        assert isinstance(observation, str) and observation
        assert 0.0 <= reward <= 1.0
        if terminated or truncated:
            env.reset(seed=0)
