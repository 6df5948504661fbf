"""Synthetic SQLite databases in five domains, generated deterministically from a seed.

>>> path = database_path("shop", seed=0)   # built once, then reused from the cache  # doctest: +SKIP

Each domain has foreign keys, NULLs (unknown emails, unreturned loans, ungraded exams),
dates, text with quotes and non-ASCII letters (``O'Brien``, ``José``, ``Zoë``) and skewed
distributions (a few customers place most orders, a few books are loaned most), with a few
hundred to several thousand rows per table. Files are built into a temporary name and
renamed into the cache (:func:`cache_dir`), so concurrent
processes never see a half-written database; the file name carries the generator version.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from palaestra.core.cache import cache_root

GENERATOR_VERSION = 1

FIRST_NAMES = (
    "Ana",
    "Ben",
    "Chloé",
    "David",
    "Élodie",
    "Farid",
    "Grace",
    "Hiroshi",
    "Ingrid",
    "José",
    "Kofi",
    "Léa",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Søren",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Xavier",
    "Yusuf",
    "Zoë",
    "Aoife",
    "Łukasz",
    "Mia",
    "Noah",
)
LAST_NAMES = (
    "O'Brien",
    "Müller",
    "García",
    "Nguyen",
    "Smith",
    "Kowalski",
    "Rossi",
    "Haddad",
    "Kim",
    "D'Angelo",
    "Novák",
    "Okafor",
    "Silva",
    "Jensen",
    "Tanaka",
    "Dubois",
    "Iyer",
    "Moreau",
    "Schmidt",
    "Fernández",
    "Brown",
    "Larsen",
    "Petrov",
    "Yilmaz",
    "Cohen",
    "MacLeod",
)
CITIES = (
    "Lisbon",
    "Kraków",
    "São Paulo",
    "Zürich",
    "Osaka",
    "Nairobi",
    "Montréal",
    "Dublin",
    "Reykjavík",
    "Austin",
    "Lagos",
    "Hanoi",
    "Tromsø",
    "Córdoba",
    "Perth",
    "Seoul",
)


class Gen:
    """The seeded random source of one build, with the skewed draws the domains share."""

    def __init__(self, seed: int, domain: str):
        self.rng = random.Random(f"{domain}:{seed}:{GENERATOR_VERSION}")

    def name(self) -> str:
        return f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"

    def skewed(self, items: Sequence[Any], alpha: float = 1.2) -> Any:
        """A Zipf-like draw: the first items are picked far more often than the last."""
        index = min(int(self.rng.paretovariate(alpha)) - 1, len(items) - 1)
        return items[index]

    def date(self, start: dt.date, days: int) -> str:
        return (start + dt.timedelta(days=self.rng.randrange(days))).isoformat()

    def maybe(self, value: Any, null_share: float) -> Any:
        return None if self.rng.random() < null_share else value

    def money(self, low: float, high: float) -> float:
        return round(self.rng.uniform(low, high), 2)


def _insert(connection: sqlite3.Connection, table: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


def build_shop(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript("""
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT,
            city TEXT NOT NULL, joined DATE NOT NULL);
        CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            category TEXT NOT NULL, price REAL NOT NULL);
        CREATE TABLE orders (id INTEGER PRIMARY KEY,
            customer_id INTEGER NOT NULL REFERENCES customers(id),
            order_date DATE NOT NULL, status TEXT NOT NULL);
        CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),
            product_id INTEGER NOT NULL REFERENCES products(id),
            quantity INTEGER NOT NULL, unit_price REAL NOT NULL,
            PRIMARY KEY (order_id, product_id));
    """)
    customers = []
    for i in range(1, 301):
        name = g.name()
        email = g.maybe(f"{name.split()[0].lower()}.{i}@example.com", 0.15)
        customers.append((i, name, email, g.skewed(CITIES, 1.1), g.date(dt.date(2019, 1, 1), 1500)))
    _insert(c, "customers", customers)
    categories = ("books", "garden", "kitchen", "toys", "electronics", "sports")
    adjectives = ("Classic", "Deluxe", "Compact", "Eco", "Pro", "Mini", "Smart", "Rustic")
    nouns = (
        "Lamp",
        "Kettle",
        "Puzzle",
        "Racket",
        "Novel",
        "Shovel",
        "Speaker",
        "Mug",
        "Drone",
        "Atlas",
    )
    products = [
        (
            i,
            f"{g.rng.choice(adjectives)} {g.rng.choice(nouns)} {i}",
            g.skewed(categories, 1.3),
            g.money(3, 400),
        )
        for i in range(1, 81)
    ]
    _insert(c, "products", products)
    statuses = ("delivered", "shipped", "processing", "cancelled", "returned")
    orders, items = [], []
    for i in range(1, 2001):
        customer = g.skewed(customers, 1.05)[0]
        orders.append((i, customer, g.date(dt.date(2021, 1, 1), 1000), g.skewed(statuses, 1.6)))
        for product in g.rng.sample(products, g.rng.randint(1, 4)):
            items.append((i, product[0], g.skewed(range(1, 6), 1.5), product[3]))
    _insert(c, "orders", orders)
    _insert(c, "order_items", items)


def build_school(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript("""
        CREATE TABLE teachers (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            department TEXT NOT NULL, hired DATE NOT NULL);
        CREATE TABLE students (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            year INTEGER NOT NULL, birth_date DATE NOT NULL,
            advisor_id INTEGER REFERENCES teachers(id));
        CREATE TABLE courses (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
            department TEXT NOT NULL, credits INTEGER NOT NULL,
            teacher_id INTEGER REFERENCES teachers(id));
        CREATE TABLE enrollments (student_id INTEGER NOT NULL REFERENCES students(id),
            course_id INTEGER NOT NULL REFERENCES courses(id), term TEXT NOT NULL,
            grade REAL, PRIMARY KEY (student_id, course_id, term));
    """)
    departments = ("Mathematics", "History", "Biology", "Literature", "Physics", "Music")
    teachers = [
        (i, g.name(), g.skewed(departments, 1.2), g.date(dt.date(2000, 1, 1), 8000))
        for i in range(1, 41)
    ]
    _insert(c, "teachers", teachers)
    students = [
        (
            i,
            g.name(),
            g.rng.randint(1, 4),
            g.date(dt.date(2003, 1, 1), 1500),
            g.maybe(g.rng.randint(1, 40), 0.2),
        )
        for i in range(1, 601)
    ]
    _insert(c, "students", students)
    topics = (
        "Algebra",
        "Ancient Rome",
        "Genetics",
        "Poetry",
        "Optics",
        "Harmony",
        "Statistics",
        "Ecology",
        "Novels of the 19th century",
        "Mechanics",
        "Jazz",
        "Cell Biology",
    )
    courses = []
    for i in range(1, 49):
        teacher = g.rng.choice(teachers)
        courses.append(
            (
                i,
                f"{g.rng.choice(topics)} {100 + i}",
                teacher[2],
                g.rng.choice((2, 3, 4, 6)),
                g.maybe(teacher[0], 0.05),
            )
        )
    _insert(c, "courses", courses)
    terms = ("2022-fall", "2023-spring", "2023-fall", "2024-spring")
    enrollments = set()
    for student in students:
        for course in g.rng.sample(courses, g.rng.randint(2, 7)):
            term = g.rng.choice(terms)
            grade = (
                None
                if term == terms[-1] and g.rng.random() < 0.6
                else round(g.rng.triangular(40, 100, 78), 1)
            )
            enrollments.add((student[0], course[0], term, grade))
    _insert(c, "enrollments", sorted(enrollments, key=lambda r: r[:3]))


def build_flights(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript("""
        CREATE TABLE airports (code TEXT PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,
            country TEXT NOT NULL);
        CREATE TABLE airlines (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
        CREATE TABLE flights (id INTEGER PRIMARY KEY,
            airline_id INTEGER NOT NULL REFERENCES airlines(id),
            origin TEXT NOT NULL REFERENCES airports(code),
            destination TEXT NOT NULL REFERENCES airports(code),
            departure DATETIME NOT NULL, duration_min INTEGER NOT NULL,
            delay_min INTEGER, price REAL NOT NULL);
        CREATE TABLE passengers (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            nationality TEXT, frequent_flyer INTEGER NOT NULL);
        CREATE TABLE bookings (id INTEGER PRIMARY KEY,
            flight_id INTEGER NOT NULL REFERENCES flights(id),
            passenger_id INTEGER NOT NULL REFERENCES passengers(id),
            seat_class TEXT NOT NULL, paid REAL NOT NULL);
    """)
    places = (
        ("LIS", "Humberto Delgado", "Lisbon", "Portugal"),
        ("KRK", "John Paul II", "Kraków", "Poland"),
        ("GRU", "Guarulhos", "São Paulo", "Brazil"),
        ("ZRH", "Zürich Airport", "Zürich", "Switzerland"),
        ("KIX", "Kansai", "Osaka", "Japan"),
        ("NBO", "Jomo Kenyatta", "Nairobi", "Kenya"),
        ("YUL", "Trudeau", "Montréal", "Canada"),
        ("DUB", "Dublin Airport", "Dublin", "Ireland"),
        ("KEF", "Keflavík", "Reykjavík", "Iceland"),
        ("AUS", "Austin-Bergstrom", "Austin", "USA"),
        ("LOS", "Murtala Muhammed", "Lagos", "Nigeria"),
        ("HAN", "Nội Bài", "Hanoi", "Vietnam"),
    )
    _insert(c, "airports", list(places))
    airlines = [
        (1, "Aer Lingus", "Ireland"),
        (2, "TAP Air Portugal", "Portugal"),
        (3, "LOT", "Poland"),
        (4, "Swiss", "Switzerland"),
        (5, "Kenya Airways", "Kenya"),
        (6, "Icelandair", "Iceland"),
        (7, "Air Canada", "Canada"),
        (8, "Peach", "Japan"),
    ]
    _insert(c, "airlines", airlines)
    codes = [p[0] for p in places]
    flights = []
    for i in range(1, 1501):
        origin = g.skewed(codes, 1.2)
        destination = g.rng.choice([code for code in codes if code != origin])
        departure = f"{g.date(dt.date(2024, 1, 1), 365)} {g.rng.randrange(5, 23):02d}:{g.rng.choice((0, 15, 30, 45)):02d}"
        flights.append(
            (
                i,
                g.skewed(airlines, 1.3)[0],
                origin,
                destination,
                departure,
                g.rng.randint(55, 780),
                g.maybe(g.skewed(range(0, 240, 5), 1.4), 0.1),
                g.money(40, 1400),
            )
        )
    _insert(c, "flights", flights)
    passengers = [
        (i, g.name(), g.maybe(g.rng.choice([p[3] for p in places]), 0.1), int(g.rng.random() < 0.3))
        for i in range(1, 801)
    ]
    _insert(c, "passengers", passengers)
    classes = ("economy", "premium", "business", "first")
    bookings = []
    for i in range(1, 4001):
        flight = g.rng.choice(flights)
        seat = g.skewed(classes, 1.8)
        bookings.append(
            (
                i,
                flight[0],
                g.skewed(passengers, 1.02)[0],
                seat,
                round(flight[7] * (1, 1.6, 3.2, 6.5)[classes.index(seat)], 2),
            )
        )
    _insert(c, "bookings", bookings)


def build_hospital(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript("""
        CREATE TABLE doctors (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            specialty TEXT NOT NULL, since DATE NOT NULL);
        CREATE TABLE patients (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
            birth_date DATE NOT NULL, city TEXT NOT NULL, insurance TEXT);
        CREATE TABLE visits (id INTEGER PRIMARY KEY,
            patient_id INTEGER NOT NULL REFERENCES patients(id),
            doctor_id INTEGER NOT NULL REFERENCES doctors(id),
            visit_date DATE NOT NULL, diagnosis TEXT, cost REAL NOT NULL);
        CREATE TABLE prescriptions (visit_id INTEGER NOT NULL REFERENCES visits(id),
            drug TEXT NOT NULL, dose_mg INTEGER NOT NULL, days INTEGER NOT NULL);
    """)
    specialties = (
        "cardiology",
        "dermatology",
        "neurology",
        "pediatrics",
        "oncology",
        "general practice",
    )
    doctors = [
        (i, f"Dr. {g.name()}", g.skewed(specialties, 1.1), g.date(dt.date(1995, 1, 1), 10000))
        for i in range(1, 31)
    ]
    _insert(c, "doctors", doctors)
    insurers = ("Vita", "Salus", "Medicor", "Ōkami Health")
    patients = [
        (
            i,
            g.name(),
            g.date(dt.date(1940, 1, 1), 28000),
            g.skewed(CITIES, 1.1),
            g.maybe(g.rng.choice(insurers), 0.25),
        )
        for i in range(1, 501)
    ]
    _insert(c, "patients", patients)
    diagnoses = (
        "hypertension",
        "migraine",
        "eczema",
        "influenza",
        "asthma",
        "fracture",
        "arrhythmia",
        "checkup",
    )
    drugs = (
        "ibuprofen",
        "amoxicillin",
        "metoprolol",
        "salbutamol",
        "hydrocortisone",
        "sumatriptan",
    )
    visits, prescriptions = [], []
    for i in range(1, 2501):
        visits.append(
            (
                i,
                g.skewed(patients, 1.05)[0],
                g.skewed(doctors, 1.2)[0],
                g.date(dt.date(2022, 1, 1), 900),
                g.maybe(g.skewed(diagnoses, 1.3), 0.08),
                g.money(30, 900),
            )
        )
        for drug in g.rng.sample(drugs, g.rng.choice((0, 0, 1, 1, 2))):
            prescriptions.append(
                (
                    i,
                    drug,
                    g.rng.choice((5, 10, 25, 50, 100, 200, 400)),
                    g.rng.choice((3, 5, 7, 14, 30)),
                )
            )
    _insert(c, "visits", visits)
    _insert(c, "prescriptions", prescriptions)


def build_library(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript("""
        CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT,
            born INTEGER);
        CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
            author_id INTEGER NOT NULL REFERENCES authors(id), year INTEGER NOT NULL,
            genre TEXT NOT NULL, pages INTEGER NOT NULL);
        CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,
            joined DATE NOT NULL);
        CREATE TABLE loans (id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(id),
            member_id INTEGER NOT NULL REFERENCES members(id), loan_date DATE NOT NULL,
            return_date DATE);
    """)
    countries = ("Ireland", "Poland", "Brazil", "Japan", "Nigeria", "Iceland", "France", "India")
    authors = [
        (
            i,
            g.name(),
            g.maybe(g.rng.choice(countries), 0.1),
            g.maybe(g.rng.randint(1890, 1995), 0.15),
        )
        for i in range(1, 121)
    ]
    _insert(c, "authors", authors)
    words = (
        "Night",
        "River",
        "Glass",
        "Garden",
        "Salt",
        "Winter",
        "Atlas",
        "Echo",
        "Harbour",
        "Lantern",
        "Orchard",
        "Storm",
        "Mirror",
        "Ember",
        "Tide",
        "Ballad",
    )
    genres = ("novel", "poetry", "history", "science", "mystery", "fantasy", "biography")
    books = []
    for i in range(1, 901):
        title = (
            f"The {g.rng.choice(words)} of {g.rng.choice(words)}"
            if g.rng.random() < 0.5
            else f"{g.rng.choice(words)}'s {g.rng.choice(words)}"
        )
        books.append(
            (
                i,
                title,
                g.skewed(authors, 1.1)[0],
                g.rng.randint(1920, 2024),
                g.skewed(genres, 1.3),
                g.rng.randint(80, 900),
            )
        )
    _insert(c, "books", books)
    members = [
        (i, g.name(), g.skewed(CITIES, 1.2), g.date(dt.date(2015, 1, 1), 3000))
        for i in range(1, 401)
    ]
    _insert(c, "members", members)
    loans = []
    for i in range(1, 5001):
        start = dt.date.fromisoformat(g.date(dt.date(2022, 1, 1), 700))
        returned = g.maybe((start + dt.timedelta(days=g.rng.randint(1, 60))).isoformat(), 0.12)
        loans.append(
            (i, g.skewed(books, 1.05)[0], g.skewed(members, 1.05)[0], start.isoformat(), returned)
        )
    _insert(c, "loans", loans)


DOMAINS: dict[str, Callable[[sqlite3.Connection, Gen], None]] = {
    "shop": build_shop,
    "school": build_school,
    "flights": build_flights,
    "hospital": build_hospital,
    "library": build_library,
}


def cache_dir() -> Path:
    """Where generated databases live: ``sql/`` under :func:`~palaestra.core.cache.cache_root`."""
    return cache_root() / "sql"


def database_path(domain: str, seed: int = 0, directory: str | Path | None = None) -> Path:
    """The SQLite file of ``domain`` generated from ``seed``; built on first use."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown SQL domain {domain!r}; domains: {sorted(DOMAINS)}")
    folder = Path(directory) if directory is not None else cache_dir()
    path = folder / f"{domain}-seed{seed}-v{GENERATOR_VERSION}.sqlite"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{domain}-", suffix=".sqlite")
    os.close(handle)
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            with connection:
                DOMAINS[domain](connection, Gen(seed, domain))
        finally:
            connection.close()
        os.chmod(temporary, 0o444)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
