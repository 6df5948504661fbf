"""Questions with gold SQL over the synthetic databases, at five levels of difficulty.

1. a filter on one table; 2. joins; 3. aggregation and grouping; 4. nested queries;
5. window functions and CTEs. Each intent has several phrasings; its parameters are drawn
from the database's own values (so most questions have a non-empty answer), with the
episode's RNG. Text parameters are quoted into the gold SQL by :func:`sql_literal`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LEVELS = {1: "filter", 2: "join", 3: "aggregate", 4: "nested", 5: "window"}


@dataclass(frozen=True)
class Intent:
    """One question: its phrasings, its gold SQL, and where its parameters come from
    (``{name: SQL whose first column lists the candidate values}``)."""

    level: int
    phrasings: tuple[str, ...]
    gold: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """A generated question: text, gold SQL, level, and which intent and phrasing made it."""

    text: str
    gold_sql: str
    level: int
    intent: str


def sql_literal(value: Any) -> str:
    """``value`` as an SQLite literal (text quoted with doubled single quotes)."""
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


INTENTS: dict[str, dict[str, Intent]] = {
    "shop": {
        "customers_in_city": Intent(
            1,
            (
                "List the names of all customers who live in {city}.",
                "Which customers are based in {city}? Give their names.",
                "Names of the customers from {city}, please.",
            ),
            "SELECT name FROM customers WHERE city = {city}",
            {"city": "SELECT DISTINCT city FROM customers"},
        ),
        "no_email": Intent(
            1,
            (
                "How many customers have no email address on file?",
                "Count the customers whose email is unknown.",
            ),
            "SELECT COUNT(*) FROM customers WHERE email IS NULL",
        ),
        "products_of_customer": Intent(
            2,
            (
                "Which distinct products has {name} ordered? List the product names.",
                "Give the names of the products that customer {name} bought (each once).",
            ),
            "SELECT DISTINCT p.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
            "WHERE c.name = {name}",
            {
                "name": "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
                "GROUP BY c.name HAVING COUNT(DISTINCT c.id) = 1"
            },
        ),
        "revenue_by_category": Intent(
            3,
            (
                "What is the total revenue (quantity times unit price) of delivered orders per product category?",
                "For each category, sum quantity * unit_price over order items of delivered orders.",
            ),
            "SELECT p.category, SUM(i.quantity * i.unit_price) FROM order_items i "
            "JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id "
            "WHERE o.status = 'delivered' GROUP BY p.category",
        ),
        "orders_per_status": Intent(
            3,
            ("How many orders are there in each status?", "Count the orders per status."),
            "SELECT status, COUNT(*) FROM orders GROUP BY status",
        ),
        "never_ordered": Intent(
            4,
            (
                "Which customers have never placed an order? Give their ids.",
                "List the ids of customers without any order.",
            ),
            "SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
        ),
        "above_category_average": Intent(
            4,
            (
                "Which products cost more than the average price of products in the {category} category? Names only.",
                "Name the products priced above the mean price of the {category} category.",
            ),
            "SELECT name FROM products WHERE price > (SELECT AVG(price) FROM products WHERE category = {category})",
            {"category": "SELECT DISTINCT category FROM products"},
        ),
        "top_product_per_category": Intent(
            5,
            (
                "For each category, which product is the most expensive? Give category and product name, ordered by category.",
                "List every category with its priciest product's name, sorted by category.",
            ),
            "SELECT category, name FROM (SELECT category, name, RANK() OVER "
            "(PARTITION BY category ORDER BY price DESC) AS r FROM products) WHERE r = 1 ORDER BY category",
        ),
        "monthly_orders_running": Intent(
            5,
            (
                "For each month of {year} (as YYYY-MM), give the number of orders and the running total of orders so far that year, in month order.",
                "Month by month in {year}: orders placed and the cumulative count, ordered by month.",
            ),
            "WITH m AS (SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS n FROM orders "
            "WHERE strftime('%Y', order_date) = {year} GROUP BY month) "
            "SELECT month, n, SUM(n) OVER (ORDER BY month) FROM m ORDER BY month",
            {"year": "SELECT DISTINCT strftime('%Y', order_date) FROM orders"},
        ),
    },
    "school": {
        "students_in_year": Intent(
            1,
            (
                "List the names of students in year {year}.",
                "Which students are in year {year}? Names only.",
            ),
            "SELECT name FROM students WHERE year = {year}",
            {"year": "SELECT DISTINCT year FROM students"},
        ),
        "no_advisor": Intent(
            1,
            ("How many students have no advisor?", "Count the students without an advisor."),
            "SELECT COUNT(*) FROM students WHERE advisor_id IS NULL",
        ),
        "courses_of_teacher": Intent(
            2,
            (
                "Which courses does {name} teach? Give the course titles.",
                "Titles of the courses taught by {name}.",
            ),
            "SELECT c.title FROM courses c JOIN teachers t ON t.id = c.teacher_id WHERE t.name = {name}",
            {
                "name": "SELECT t.name FROM teachers t JOIN courses c ON c.teacher_id = t.id "
                "GROUP BY t.name HAVING COUNT(DISTINCT t.id) = 1"
            },
        ),
        "average_grade_by_department": Intent(
            3,
            (
                "What is the average grade per course department, counting graded enrollments only?",
                "Per department of the course, the mean of the known grades.",
            ),
            "SELECT c.department, AVG(e.grade) FROM enrollments e JOIN courses c ON c.id = e.course_id "
            "WHERE e.grade IS NOT NULL GROUP BY c.department",
        ),
        "ungraded_per_term": Intent(
            3,
            (
                "How many enrollments have no grade yet, per term?",
                "Count ungraded enrollments for each term.",
            ),
            "SELECT term, COUNT(*) FROM enrollments WHERE grade IS NULL GROUP BY term",
        ),
        "above_average_students": Intent(
            4,
            (
                "Which students have an average grade above the overall average grade? Give their ids.",
                "Ids of students whose mean grade beats the mean of all grades.",
            ),
            "SELECT student_id FROM enrollments WHERE grade IS NOT NULL GROUP BY student_id "
            "HAVING AVG(grade) > (SELECT AVG(grade) FROM enrollments WHERE grade IS NOT NULL)",
        ),
        "best_in_course": Intent(
            5,
            (
                "For course {course_id}, rank the graded students by grade (best first, ties share a rank): give student id, grade and rank, ordered by rank then student id.",
                "Ranking of course {course_id}: student id, grade and RANK by grade descending, sorted by rank and id.",
            ),
            "SELECT student_id, grade, RANK() OVER (ORDER BY grade DESC) AS r FROM enrollments "
            "WHERE course_id = {course_id} AND grade IS NOT NULL ORDER BY r, student_id",
            {"course_id": "SELECT DISTINCT course_id FROM enrollments WHERE grade IS NOT NULL"},
        ),
    },
    "flights": {
        "flights_from": Intent(
            1,
            (
                "List the ids of flights departing from {origin}.",
                "Which flights leave {origin}? Ids only.",
            ),
            "SELECT id FROM flights WHERE origin = {origin}",
            {"origin": "SELECT DISTINCT origin FROM flights"},
        ),
        "unknown_delay": Intent(
            1,
            ("How many flights have an unknown delay?",),
            "SELECT COUNT(*) FROM flights WHERE delay_min IS NULL",
        ),
        "flights_to_city": Intent(
            2,
            (
                "Which airlines fly to {city}? Give the distinct airline names.",
                "Names of the airlines with at least one flight into {city}.",
            ),
            "SELECT DISTINCT al.name FROM flights f JOIN airlines al ON al.id = f.airline_id "
            "JOIN airports ap ON ap.code = f.destination WHERE ap.city = {city}",
            {
                "city": "SELECT DISTINCT ap.city FROM flights f JOIN airports ap ON ap.code = f.destination"
            },
        ),
        "average_price_by_airline": Intent(
            3,
            (
                "What is the average ticket price per airline name?",
                "Mean flight price for each airline (by name).",
            ),
            "SELECT al.name, AVG(f.price) FROM flights f JOIN airlines al ON al.id = f.airline_id GROUP BY al.name",
        ),
        "busy_routes": Intent(
            3,
            (
                "Which origin-destination pairs have more than {n} flights? Give origin, destination and the count.",
                "Routes with over {n} flights: origin, destination, number of flights.",
            ),
            "SELECT origin, destination, COUNT(*) FROM flights GROUP BY origin, destination HAVING COUNT(*) > {n}",
            {
                "n": "SELECT COUNT(*) - 1 FROM flights GROUP BY origin, destination ORDER BY COUNT(*) DESC LIMIT 5"
            },
        ),
        "never_booked": Intent(
            4,
            ("How many passengers have never booked a flight?",),
            "SELECT COUNT(*) FROM passengers WHERE id NOT IN (SELECT passenger_id FROM bookings)",
        ),
        "longest_per_origin": Intent(
            5,
            (
                "For each origin airport, the id of its longest flight (lowest id on ties), ordered by origin.",
                "Per departure airport, which flight lasts longest? Origin and flight id, sorted by origin.",
            ),
            "SELECT origin, id FROM (SELECT origin, id, ROW_NUMBER() OVER (PARTITION BY origin "
            "ORDER BY duration_min DESC, id) AS r FROM flights) WHERE r = 1 ORDER BY origin",
        ),
    },
    "hospital": {
        "patients_uninsured": Intent(
            1,
            (
                "List the names of patients from {city} without insurance.",
                "Which patients in {city} have no insurer? Names.",
            ),
            "SELECT name FROM patients WHERE city = {city} AND insurance IS NULL",
            {"city": "SELECT DISTINCT city FROM patients WHERE insurance IS NULL"},
        ),
        "doctors_by_specialty": Intent(
            1,
            ("Which doctors practise {specialty}? Give their names.",),
            "SELECT name FROM doctors WHERE specialty = {specialty}",
            {"specialty": "SELECT DISTINCT specialty FROM doctors"},
        ),
        "drugs_for_patient": Intent(
            2,
            (
                "Which drugs were prescribed to {name}? Distinct drug names.",
                "Give the distinct drugs {name} has been prescribed.",
            ),
            "SELECT DISTINCT pr.drug FROM patients p JOIN visits v ON v.patient_id = p.id "
            "JOIN prescriptions pr ON pr.visit_id = v.id WHERE p.name = {name}",
            {
                "name": "SELECT p.name FROM patients p JOIN visits v ON v.patient_id = p.id "
                "JOIN prescriptions pr ON pr.visit_id = v.id GROUP BY p.name HAVING COUNT(DISTINCT p.id) = 1"
            },
        ),
        "cost_by_specialty": Intent(
            3,
            (
                "What is the total cost of visits per doctor specialty?",
                "Sum of visit costs grouped by the doctor's specialty.",
            ),
            "SELECT d.specialty, SUM(v.cost) FROM visits v JOIN doctors d ON d.id = v.doctor_id GROUP BY d.specialty",
        ),
        "costly_patients": Intent(
            4,
            (
                "Which patients spent more in total than the average patient with visits? Give their ids.",
            ),
            "SELECT patient_id FROM visits GROUP BY patient_id HAVING SUM(cost) > "
            "(SELECT AVG(total) FROM (SELECT SUM(cost) AS total FROM visits GROUP BY patient_id))",
        ),
        "visit_gaps": Intent(
            5,
            (
                "For patient {patient_id}, list each visit date with the date of their previous visit (NULL for the first), in date order.",
                "Visits of patient {patient_id}: date and the previous visit's date, chronologically.",
            ),
            "SELECT visit_date, LAG(visit_date) OVER (ORDER BY visit_date, id) FROM visits "
            "WHERE patient_id = {patient_id} ORDER BY visit_date, id",
            {
                "patient_id": "SELECT patient_id FROM visits GROUP BY patient_id HAVING COUNT(*) >= 2"
            },
        ),
    },
    "library": {
        "books_by_genre_after": Intent(
            1,
            (
                "List the titles of {genre} books published after {year}.",
                "Which {genre} books came out later than {year}? Titles.",
            ),
            "SELECT title FROM books WHERE genre = {genre} AND year > {year}",
            {
                "genre": "SELECT DISTINCT genre FROM books",
                "year": "SELECT DISTINCT year FROM books WHERE year < 2015",
            },
        ),
        "open_loans": Intent(
            1,
            ("How many loans have not been returned?", "Count the loans still out."),
            "SELECT COUNT(*) FROM loans WHERE return_date IS NULL",
        ),
        "books_of_author": Intent(
            2,
            ("Which books did {name} write? Titles.", "Titles written by {name}."),
            "SELECT b.title FROM books b JOIN authors a ON a.id = b.author_id WHERE a.name = {name}",
            {
                "name": "SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id GROUP BY a.name HAVING COUNT(DISTINCT a.id) = 1"
            },
        ),
        "loans_per_genre": Intent(
            3,
            ("How many loans were made per book genre?", "Number of loans for each genre."),
            "SELECT b.genre, COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id GROUP BY b.genre",
        ),
        "never_loaned": Intent(
            4,
            ("How many books have never been loaned?",),
            "SELECT COUNT(*) FROM books WHERE id NOT IN (SELECT book_id FROM loans)",
        ),
        "top_members": Intent(
            5,
            (
                "Who are the three members with the most loans? Give member id and loan count, most loans first (lower id first on ties).",
                "Top three borrowers by number of loans: id and count, descending, ties by id.",
            ),
            "WITH counts AS (SELECT member_id, COUNT(*) AS n FROM loans GROUP BY member_id) "
            "SELECT member_id, n FROM counts ORDER BY n DESC, member_id LIMIT 3",
        ),
    },
}


def generate_question(
    domain: str,
    connection: sqlite3.Connection,
    rng: np.random.Generator,
    *,
    levels: tuple[int, ...] = tuple(LEVELS),
) -> Question:
    """A question of ``domain`` at one of ``levels``, parameters drawn from the database."""
    candidates = sorted(name for name, intent in INTENTS[domain].items() if intent.level in levels)
    if not candidates:
        raise ValueError(f"domain {domain!r} has no question at levels {levels}")
    name = candidates[int(rng.integers(len(candidates)))]
    intent = INTENTS[domain][name]
    values = {}
    for param, query in intent.params.items():
        options = sorted({row[0] for row in connection.execute(query)}, key=repr)
        values[param] = options[int(rng.integers(len(options)))]
    text = intent.phrasings[int(rng.integers(len(intent.phrasings)))].format(**values)
    gold = intent.gold.format(**{k: sql_literal(v) for k, v in values.items()})
    return Question(text, gold, intent.level, name)
