"""Hospital: doctors (some supervised by another), patients, visits and prescriptions."""

from __future__ import annotations

import datetime as dt
import sqlite3

from palaestra.envs.sql.domains.base import CITIES, Gen, Intent, insert

SCHEMA = """
CREATE TABLE doctors (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    specialty TEXT NOT NULL, since DATE NOT NULL,
    supervisor_id INTEGER REFERENCES doctors(id));
CREATE TABLE patients (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    birth_date DATE NOT NULL, city TEXT NOT NULL, insurance TEXT);
CREATE TABLE visits (id INTEGER PRIMARY KEY,
    patient_id INTEGER NOT NULL REFERENCES patients(id),
    doctor_id INTEGER NOT NULL REFERENCES doctors(id),
    visit_date DATE NOT NULL, diagnosis TEXT, cost REAL NOT NULL);
CREATE TABLE prescriptions (visit_id INTEGER NOT NULL REFERENCES visits(id),
    drug TEXT NOT NULL, dose_mg INTEGER NOT NULL, days INTEGER NOT NULL);
"""
SPECIALTIES = (
    "cardiology", "dermatology", "neurology", "pediatrics", "oncology", "general practice",
)  # fmt: skip
INSURERS = ("Vita", "Salus", "Medicor", "Ōkami Health")
DIAGNOSES = (
    "hypertension", "migraine", "eczema", "influenza", "asthma", "fracture", "arrhythmia",
    "checkup",
)  # fmt: skip
DRUGS = ("ibuprofen", "amoxicillin", "metoprolol", "salbutamol", "hydrocortisone", "sumatriptan")


def build(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript(SCHEMA)
    d = g.size(30)
    doctors = list(range(1, d + 1))
    supervisors = [int(i * u) or None for i, u in zip(doctors, g.rng.random(d), strict=True)]
    insert(c, "doctors", [
        doctors, [f"Dr. {name}" for name in g.names(d)],
        g.skewed(g.shuffled(SPECIALTIES), d, 1.1), g.dates(dt.date(1995, 1, 1), 10000, d),
        g.nulls(supervisors, 0.4),
    ])  # fmt: skip
    n = g.size(500)
    patients = list(range(1, n + 1))
    insert(c, "patients", [
        patients, g.names(n), g.dates(dt.date(1940, 1, 1), 28000, n),
        g.skewed(g.shuffled(CITIES), n, 1.1), g.nulls(g.choice(INSURERS, n), 0.25),
    ])  # fmt: skip
    v = g.size(2500)
    visits = list(range(1, v + 1))
    insert(c, "visits", [
        visits, g.skewed(g.shuffled(patients), v, 1.05), g.skewed(g.shuffled(doctors), v, 1.2),
        g.dates(dt.date(2022, 1, 1), 900, v),
        g.nulls(g.skewed(g.shuffled(DIAGNOSES), v, 1.3), 0.08), g.money(30, 900, v),
    ])  # fmt: skip
    given = g.subsets(DRUGS, g.choice((0, 0, 1, 1, 2), v))
    rows = [(visit, drug) for visit, drugs in zip(visits, given, strict=True) for drug in drugs]
    insert(c, "prescriptions", [
        [visit for visit, _ in rows], [drug for _, drug in rows],
        g.choice((5, 10, 25, 50, 100, 200, 400), len(rows)), g.choice((3, 5, 7, 14, 30), len(rows)),
    ])  # fmt: skip


_YEAR = "SELECT strftime('%Y', visit_date) FROM visits"

INTENTS = {
    "uninsured_patients": Intent(
        1,
        (
            "List the names of the patients from {city} born before {born} who have no "
            "insurance, one row per patient.",
            "Which patients living in {city}, born earlier than {born}, have no insurer? "
            "Names, one row per patient.",
        ),
        "SELECT name FROM patients WHERE city = {city} AND insurance IS NULL "
        "AND birth_date < {born}",
        {
            "city": "SELECT city FROM patients WHERE insurance IS NULL",
            "born": "SELECT birth_date FROM patients WHERE city = {city} AND insurance IS NULL",
        },
    ),
    "doctors_since": Intent(
        1,
        (
            "Which {specialty} doctors have practised since {start} or earlier? Give their "
            "names, one row per doctor.",
            "Names of the doctors in {specialty} whose start date is on or before {start} "
            "(one row per doctor).",
        ),
        "SELECT name FROM doctors WHERE specialty = {specialty} AND since <= {start}",
        {
            "specialty": "SELECT specialty FROM doctors",
            "start": "SELECT since FROM doctors WHERE specialty = {specialty}",
        },
    ),
    "costly_visits": Intent(
        1,
        (
            "Which visits diagnosed as {diagnosis} cost between {low} and {high}, both "
            "included? Give visit id and cost.",
            "Visits with diagnosis {diagnosis} and a cost from {low} to {high}: id, cost.",
        ),
        "SELECT id, cost FROM visits WHERE diagnosis = {diagnosis} "
        "AND cost BETWEEN {low} AND {high}",
        {
            "diagnosis": "SELECT diagnosis FROM visits WHERE diagnosis IS NOT NULL",
            "low": "SELECT cost FROM visits WHERE diagnosis = {diagnosis}",
            "high": "SELECT cost FROM visits WHERE diagnosis = {diagnosis} AND cost >= {low}",
        },
    ),
    "dose_labels": Intent(
        1,
        (
            "For every {drug} prescription (one row per prescription), give the visit id, "
            "the dose in mg and 'high' when the dose is at least {limit} mg, else 'standard'.",
            "Prescriptions of {drug}, one row per prescription: visit id, dose_mg, and the "
            "label high (dose of {limit} mg or more) or standard.",
        ),
        "SELECT visit_id, dose_mg, CASE WHEN dose_mg >= {limit} THEN 'high' "
        "ELSE 'standard' END FROM prescriptions WHERE drug = {drug}",
        {
            "drug": "SELECT drug FROM prescriptions",
            "limit": "SELECT dose_mg FROM prescriptions WHERE drug = {drug}",
        },
    ),
    "patients_named": Intent(
        1,
        (
            "Which patients have a name starting with '{first}'? Give id, name and city.",
            "Id, name and city of every patient whose name begins with {first}.",
        ),
        "SELECT id, name, city FROM patients WHERE name LIKE {first} || ' %'",
        {"first": "SELECT substr(name, 1, instr(name, ' ') - 1) FROM patients"},
    ),
    "drugs_for_patient": Intent(
        2,
        (
            "Which drugs were prescribed to {name}? Give each drug name once.",
            "The distinct drugs {name} has been prescribed.",
        ),
        "SELECT DISTINCT pr.drug FROM patients p JOIN visits v ON v.patient_id = p.id "
        "JOIN prescriptions pr ON pr.visit_id = v.id WHERE p.name = {name}",
        {
            "name": "SELECT p.name FROM patients p JOIN visits v ON v.patient_id = p.id "
            "JOIN prescriptions pr ON pr.visit_id = v.id GROUP BY p.name "
            "HAVING COUNT(DISTINCT p.id) = 1 AND COUNT(DISTINCT pr.drug) <= 4"
        },
    ),
    "supervised_doctors": Intent(
        2,
        (
            "Which {specialty} doctors have a supervisor? Give each doctor's name and their "
            "supervisor's name and specialty.",
            "For every doctor in {specialty} who is supervised: doctor name, supervisor "
            "name, supervisor specialty.",
        ),
        "SELECT d.name, s.name, s.specialty FROM doctors d "
        "JOIN doctors s ON s.id = d.supervisor_id WHERE d.specialty = {specialty}",
        {"specialty": "SELECT specialty FROM doctors WHERE supervisor_id IS NOT NULL"},
    ),
    "city_visits_in_month": Intent(
        2,
        (
            "List the visit ids and doctor names of the visits in {month} (year-month) by "
            "patients living in {city}.",
            "Visits during {month} of patients from {city}: visit id and the doctor's name.",
        ),
        "SELECT v.id, d.name FROM visits v JOIN patients p ON p.id = v.patient_id "
        "JOIN doctors d ON d.id = v.doctor_id WHERE p.city = {city} "
        "AND strftime('%Y-%m', v.visit_date) = {month}",
        {
            "city": "SELECT city FROM patients",
            "month": "SELECT strftime('%Y-%m', v.visit_date) FROM visits v "
            "JOIN patients p ON p.id = v.patient_id WHERE p.city = {city}",
        },
    ),
    "prescriptions_by_doctor": Intent(
        2,
        (
            "Which drugs did {doctor} prescribe, at which dose and for how many days? One "
            "row per prescription: drug, dose in mg, days.",
            "Prescriptions written in visits with {doctor}: drug, dose_mg, days (one row each).",
        ),
        "SELECT pr.drug, pr.dose_mg, pr.days FROM prescriptions pr "
        "JOIN visits v ON v.id = pr.visit_id JOIN doctors d ON d.id = v.doctor_id "
        "WHERE d.name = {doctor}",
        {
            "doctor": "SELECT d.name FROM doctors d JOIN visits v ON v.doctor_id = d.id "
            "JOIN prescriptions pr ON pr.visit_id = v.id GROUP BY d.name "
            "HAVING COUNT(DISTINCT d.id) = 1"
        },
    ),
    "cost_by_specialty": Intent(
        3,
        (
            "What is the total cost of the visits in {year} per doctor specialty, for "
            "patients living in {city}? Specialty and total.",
            "Sum of visit costs in {year}, grouped by the doctor's specialty, counting only "
            "patients from {city}.",
        ),
        "SELECT d.specialty, SUM(v.cost) FROM visits v JOIN doctors d ON d.id = v.doctor_id "
        "JOIN patients p ON p.id = v.patient_id WHERE strftime('%Y', v.visit_date) = {year} "
        "AND p.city = {city} GROUP BY d.specialty",
        {"year": _YEAR, "city": "SELECT city FROM patients"},
    ),
    "busy_doctors": Intent(
        3,
        (
            "Which doctors had more than {n} visits in {year}? Give doctor id and the "
            "number of visits.",
            "Doctors with over {n} visits during {year}: id and visit count.",
        ),
        "SELECT doctor_id, COUNT(*) FROM visits WHERE strftime('%Y', visit_date) = {year} "
        "GROUP BY doctor_id HAVING COUNT(*) > {n}",
        {
            "year": _YEAR,
            "n": "SELECT COUNT(*) - 1 FROM visits WHERE strftime('%Y', visit_date) = {year} "
            "GROUP BY doctor_id",
        },
    ),
    "diagnosis_split_by_city": Intent(
        3,
        (
            "For each patient city, how many visits in {year} were diagnosed {diagnosis} "
            "and how many were not (other or unknown diagnosis)? City, the two counts.",
            "Per city of the patients, {year}: visits with diagnosis {diagnosis}, then all "
            "other visits (including those without a diagnosis).",
        ),
        "SELECT p.city, SUM(CASE WHEN v.diagnosis = {diagnosis} THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN v.diagnosis = {diagnosis} THEN 0 ELSE 1 END) FROM visits v "
        "JOIN patients p ON p.id = v.patient_id WHERE strftime('%Y', v.visit_date) = {year} "
        "GROUP BY p.city",
        {
            "diagnosis": "SELECT diagnosis FROM visits WHERE diagnosis IS NOT NULL",
            "year": _YEAR,
        },
    ),
    "dose_by_drug_for_insurer": Intent(
        3,
        (
            "What is the average dose in mg of each drug prescribed to patients insured by "
            "{insurer}? Drug and average dose.",
            "Per drug, the mean dose_mg over prescriptions of {insurer} patients.",
        ),
        "SELECT pr.drug, AVG(pr.dose_mg) FROM prescriptions pr "
        "JOIN visits v ON v.id = pr.visit_id JOIN patients p ON p.id = v.patient_id "
        "WHERE p.insurance = {insurer} GROUP BY pr.drug",
        {"insurer": "SELECT insurance FROM patients WHERE insurance IS NOT NULL"},
    ),
    "never_prescribed_drug": Intent(
        4,
        (
            "Which patients from {city} who had at least one visit were never prescribed "
            "{drug}? Give their ids.",
            "Ids of the patients living in {city} with visits but no {drug} prescription.",
        ),
        "SELECT v.patient_id FROM visits v JOIN patients p ON p.id = v.patient_id "
        "WHERE p.city = {city} EXCEPT SELECT v.patient_id FROM visits v "
        "JOIN prescriptions pr ON pr.visit_id = v.id WHERE pr.drug = {drug}",
        {"city": "SELECT city FROM patients", "drug": "SELECT drug FROM prescriptions"},
    ),
    "both_diagnoses": Intent(
        4,
        (
            "Which patients have had a visit diagnosed {first} and another diagnosed "
            "{second}? Give their ids.",
            "Ids of the patients diagnosed with both {first} and {second} (in any visits).",
        ),
        "SELECT patient_id FROM visits WHERE diagnosis = {first} INTERSECT "
        "SELECT patient_id FROM visits WHERE diagnosis = {second}",
        {
            "first": "SELECT diagnosis FROM visits WHERE diagnosis IS NOT NULL",
            "second": "SELECT diagnosis FROM visits WHERE diagnosis IS NOT NULL "
            "AND diagnosis <> {first}",
        },
    ),
    "above_specialty_average": Intent(
        4,
        (
            "Which visits in {month} (year-month) cost more than the average cost of all "
            "visits to doctors of the same specialty? Give visit id and cost.",
            "Visits during {month} priced above the mean visit cost of their doctor's "
            "specialty: id, cost.",
        ),
        "SELECT v.id, v.cost FROM visits v JOIN doctors d ON d.id = v.doctor_id "
        "WHERE strftime('%Y-%m', v.visit_date) = {month} AND v.cost > "
        "(SELECT AVG(w.cost) FROM visits w JOIN doctors e ON e.id = w.doctor_id "
        "WHERE e.specialty = d.specialty)",
        {"month": "SELECT strftime('%Y-%m', visit_date) FROM visits"},
    ),
    "costly_patients": Intent(
        4,
        (
            "Which patients from {city} spent more in total on visits than the average "
            "patient from {city} with visits? Give their ids.",
            "Among patients living in {city} who had visits, the ids of those whose total "
            "visit cost exceeds the group's average total.",
        ),
        "SELECT v.patient_id FROM visits v JOIN patients p ON p.id = v.patient_id "
        "WHERE p.city = {city} GROUP BY v.patient_id HAVING SUM(v.cost) > "
        "(SELECT AVG(total) FROM (SELECT SUM(w.cost) AS total FROM visits w "
        "JOIN patients q ON q.id = w.patient_id WHERE q.city = {city} "
        "GROUP BY w.patient_id) AS totals)",
        {"city": "SELECT city FROM patients"},
    ),
    "visit_gaps": Intent(
        5,
        (
            "For patient {patient_id}, list each visit date with the date of their previous "
            "visit (NULL for the first), one row per visit, in date order (ties by visit id).",
            "Visits of patient {patient_id}, chronologically then by id, one row per visit: "
            "date and the previous visit's date (NULL at first).",
        ),
        "SELECT visit_date, LAG(visit_date) OVER (ORDER BY visit_date, id) FROM visits "
        "WHERE patient_id = {patient_id} ORDER BY visit_date, id",
        {"patient_id": "SELECT patient_id FROM visits GROUP BY patient_id HAVING COUNT(*) >= 2"},
    ),
    "top_doctor_per_specialty": Intent(
        5,
        (
            "For each specialty, which doctor saw the most visits in {year}? Give specialty, "
            "doctor id and the number of visits, ordered by specialty; list every doctor "
            "who ties.",
            "Busiest doctor of each specialty in {year} by visits: specialty, doctor id, "
            "visits, sorted by specialty (all tied doctors).",
        ),
        "WITH counts AS (SELECT d.specialty, d.id, COUNT(*) AS n FROM visits v "
        "JOIN doctors d ON d.id = v.doctor_id WHERE strftime('%Y', v.visit_date) = {year} "
        "GROUP BY d.specialty, d.id), ranked AS (SELECT specialty, id, n, RANK() OVER "
        "(PARTITION BY specialty ORDER BY n DESC) AS place FROM counts) "
        "SELECT specialty, id, n FROM ranked WHERE place = 1 ORDER BY specialty",
        {"year": _YEAR},
    ),
    "running_cost": Intent(
        5,
        (
            "For patient {patient_id}, give each visit's id, date and cost with the running "
            "total of their visit costs so far, in date order (ties by visit id).",
            "Visits of patient {patient_id} in date order, then id: id, date, cost, "
            "cumulative cost.",
        ),
        "SELECT id, visit_date, cost, SUM(cost) OVER (ORDER BY visit_date, id) FROM visits "
        "WHERE patient_id = {patient_id} ORDER BY visit_date, id",
        {"patient_id": "SELECT patient_id FROM visits"},
    ),
}
