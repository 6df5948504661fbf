"""Labelled (gold, predicted) pairs on the generated databases, graded on both backends.

Each pair is an equivalent rewrite (the grader must say 1) or a near miss (it must say 0:
no false positive), checked on two databases of its domain, on SQLite and on DuckDB (the
predicted query transpiled from SQLite by sqlglot, the gold run on SQLite as always).
"""

from __future__ import annotations

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

from palaestra.envs.sql.databases import database_path, suite_paths
from palaestra.envs.sql.env import DEFAULT_SUITE
from palaestra.verifiers.sql import SQLiteDatabase, execution_match

SAME, MISS = True, False

LINES = "order_items i JOIN products p ON p.id = i.product_id"
BUSIEST = (
    "(SELECT patient_id FROM visits GROUP BY patient_id ORDER BY COUNT(*) DESC, patient_id LIMIT 1)"
)
SHOP = [
    ("SELECT name FROM customers WHERE joined >= '2021-01-01'", [
        (SAME, "SELECT c.name FROM customers AS c WHERE c.joined > '2020-12-31'"),
        (SAME, "SELECT name FROM customers WHERE joined >= '2021-01-01' ORDER BY id DESC"),
        (SAME, "SELECT name FROM customers WHERE NOT joined < '2021-01-01'"),
        (MISS, "SELECT DISTINCT name FROM customers WHERE joined >= '2021-01-01'"),
        (MISS, "SELECT name FROM customers WHERE joined >= '2021-02-01'"),
        (MISS, "SELECT name, joined FROM customers WHERE joined >= '2021-01-01'"),
        (MISS, "SELECT name FROM customers WHERE joined >= '2021-01-01' LIMIT 3"),
        (MISS, "SELECT name FROM customers WHERE joined >= '2021-01-01' AND email IS NOT NULL"),
    ]),
    ("SELECT COUNT(*) FROM customers WHERE email IS NULL", [
        (SAME, "SELECT SUM(CASE WHEN email IS NULL THEN 1 ELSE 0 END) FROM customers"),
        (SAME, "SELECT COUNT(*) - COUNT(email) FROM customers"),
        (SAME, "SELECT COUNT(*) * 1.0 FROM customers WHERE email IS NULL"),
        (MISS, "SELECT COUNT(email) FROM customers"),
        (MISS, "SELECT COUNT(*) FROM customers WHERE email = ''"),
        (MISS, "SELECT COUNT(*) + 1 FROM customers WHERE email IS NULL"),
    ]),
    (f"SELECT p.category, SUM(i.quantity * i.unit_price) FROM {LINES} GROUP BY p.category", [
        (SAME, f"SELECT SUM(i.unit_price * i.quantity), p.category FROM {LINES} GROUP BY 2"),
        (SAME, "SELECT category, (SELECT SUM(i.quantity * i.unit_price) FROM order_items i "
               "JOIN products q ON q.id = i.product_id WHERE q.category = p.category) "
               "FROM (SELECT DISTINCT category FROM products) AS p"),
        (MISS, f"SELECT p.category, SUM(i.unit_price) FROM {LINES} GROUP BY p.category"),
        (MISS, f"SELECT p.category, ROUND(SUM(i.quantity * i.unit_price), 1) FROM {LINES} "
               "GROUP BY p.category"),
        (MISS, f"SELECT p.category, SUM(i.quantity * p.price) + 0.01 FROM {LINES} GROUP BY p.category"),
    ]),
    ("SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id HAVING COUNT(*) > 3", [
        (SAME, "SELECT * FROM (SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id) "
               "AS t WHERE n > 3"),
        (SAME, "SELECT customer_id, COUNT(id) FROM orders GROUP BY 1 HAVING COUNT(*) >= 4"),
        (MISS, "SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id HAVING COUNT(*) >= 3"),
        (MISS, "SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) > 3"),
    ]),
    ("SELECT id FROM customers EXCEPT SELECT customer_id FROM orders", [
        (SAME, "SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
        (SAME, "SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
               "WHERE o.id IS NULL"),
        (SAME, "SELECT id FROM customers c WHERE NOT EXISTS "
               "(SELECT 1 FROM orders o WHERE o.customer_id = c.id)"),
        (MISS, "SELECT id FROM customers WHERE referred_by IS NULL"),
        (MISS, "SELECT customer_id FROM orders EXCEPT SELECT id FROM customers"),
    ]),
    ("SELECT c.id, COUNT(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
     "GROUP BY c.id", [
        (SAME, "SELECT id, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) "
               "FROM customers c"),
        (MISS, "SELECT c.id, COUNT(*) FROM customers c JOIN orders o ON o.customer_id = c.id "
               "GROUP BY c.id"),
        (MISS, "SELECT c.id, COUNT(*) FROM customers c LEFT JOIN orders o "
               "ON o.customer_id = c.id GROUP BY c.id"),
    ]),
    ("SELECT SUM(quantity) FROM order_items", [
        (SAME, "SELECT SUM(quantity) * 1.0 FROM order_items"),
        (SAME, "SELECT CAST(SUM(quantity) AS REAL) FROM order_items"),
        (MISS, "SELECT SUM(quantity) - 1 FROM order_items"),
        (MISS, "SELECT SUM(quantity) * 1.000001 FROM order_items"),
        (MISS, "SELECT COUNT(*) FROM order_items"),
    ]),
    ("SELECT category, id, price FROM products ORDER BY category", [
        (SAME, "SELECT category, id, price FROM products ORDER BY category, price DESC"),
        (SAME, "SELECT price, id, category FROM products ORDER BY category, id"),
        (MISS, "SELECT category, id, price FROM products ORDER BY category DESC"),
        (MISS, "SELECT category, id, price FROM products ORDER BY price"),
    ]),
    ("SELECT c.name, r.name FROM customers c JOIN customers r ON r.id = c.referred_by", [
        (SAME, "SELECT (SELECT name FROM customers r WHERE r.id = c.referred_by), name "
               "FROM customers c WHERE referred_by IS NOT NULL"),
        (SAME, "SELECT r.name, c.name FROM customers r JOIN customers c ON r.id = c.referred_by"),
        (MISS, "SELECT c.name, c.name FROM customers c WHERE c.referred_by IS NOT NULL"),
        (MISS, "SELECT c.name, r.name FROM customers c LEFT JOIN customers r "
               "ON r.id = c.referred_by"),
    ]),
]  # fmt: skip

SCHOOL = [
    ("SELECT name FROM students WHERE year = 2", [
        (SAME, "SELECT name FROM students WHERE year IN (2) ORDER BY name"),
        (SAME, "SELECT s.name FROM students s WHERE s.year BETWEEN 2 AND 2"),
        (MISS, "SELECT DISTINCT name FROM students WHERE year = 2"),  # names repeat
        (MISS, "SELECT name FROM students WHERE year >= 2"),
        (SAME, "SELECT name FROM students WHERE year = '2'"),  # numeric affinity
        (MISS, "SELECT name FROM students WHERE year = 2 AND advisor_id IS NOT NULL"),
    ]),
    ("SELECT c.department, AVG(e.grade) FROM enrollments e JOIN courses c "
     "ON c.id = e.course_id WHERE e.grade IS NOT NULL GROUP BY c.department", [
        (SAME, "SELECT c.department, AVG(e.grade) FROM enrollments e JOIN courses c "
               "ON c.id = e.course_id GROUP BY c.department"),
        (SAME, "SELECT c.department, SUM(e.grade) / COUNT(e.grade) FROM enrollments e "
               "JOIN courses c ON c.id = e.course_id GROUP BY c.department"),
        (MISS, "SELECT c.department, SUM(e.grade) / COUNT(*) FROM enrollments e "
               "JOIN courses c ON c.id = e.course_id GROUP BY c.department"),
        (MISS, "SELECT c.department, ROUND(AVG(e.grade), 2) FROM enrollments e "
               "JOIN courses c ON c.id = e.course_id GROUP BY c.department"),
        (MISS, "SELECT c.department, AVG(COALESCE(e.grade, 0)) FROM enrollments e "
               "JOIN courses c ON c.id = e.course_id GROUP BY c.department"),
    ]),
    ("SELECT id, credits, RANK() OVER (ORDER BY credits DESC) AS r FROM courses "
     "ORDER BY r, id", [
        (SAME, "SELECT id, credits, (SELECT COUNT(*) + 1 FROM courses x "
               "WHERE x.credits > c.credits) AS r FROM courses c ORDER BY r, id"),
        (SAME, "SELECT r, credits, id FROM (SELECT id, credits, RANK() OVER "
               "(ORDER BY credits DESC) AS r FROM courses) AS t ORDER BY r, id"),
        (MISS, "SELECT id, credits, RANK() OVER (ORDER BY credits DESC) AS r FROM courses "
               "ORDER BY r, id DESC"),
        (MISS, "SELECT id, credits, ROW_NUMBER() OVER (ORDER BY credits DESC, id) AS r "
               "FROM courses ORDER BY r, id"),
        (MISS, "SELECT id, credits, DENSE_RANK() OVER (ORDER BY credits DESC) AS r "
               "FROM courses ORDER BY r, id"),
    ]),
    ("SELECT student_id FROM enrollments WHERE course_id = 5 INTERSECT "
     "SELECT student_id FROM enrollments WHERE course_id = 9", [
        (SAME, "SELECT DISTINCT a.student_id FROM enrollments a JOIN enrollments b "
               "ON b.student_id = a.student_id WHERE a.course_id = 5 AND b.course_id = 9"),
        (MISS, "SELECT student_id FROM enrollments WHERE course_id = 5 UNION "
               "SELECT student_id FROM enrollments WHERE course_id = 9"),
        (MISS, "SELECT student_id FROM enrollments WHERE course_id IN (5, 9)"),
    ]),
    ("SELECT c.title, p.title FROM courses c JOIN courses p ON p.id = c.prerequisite_id", [
        (SAME, "SELECT p.title, c.title FROM courses p JOIN courses c ON c.prerequisite_id = p.id"),
        (SAME, "SELECT c.title, p.title FROM courses p JOIN courses c ON p.id = c.prerequisite_id"),
        (MISS, "SELECT c.title, p.title FROM courses c LEFT JOIN courses p "
               "ON p.id = c.prerequisite_id"),
    ]),
]  # fmt: skip

FLIGHTS = [
    ("SELECT id FROM flights WHERE origin = 'LIS' AND delay_min IS NULL", [
        (SAME, "SELECT id FROM flights WHERE origin = 'LIS' AND NOT delay_min IS NOT NULL"),
        (MISS, "SELECT id FROM flights WHERE origin = 'LIS' AND delay_min = 0"),
        (MISS, "SELECT id FROM flights WHERE origin = 'LIS' AND (delay_min IS NULL OR delay_min = 0)"),
    ]),
    ("SELECT al.name, AVG(f.price) FROM flights f JOIN airlines al ON al.id = f.airline_id "
     "GROUP BY al.name", [
        (SAME, "SELECT al.name, SUM(f.price) / COUNT(*) FROM airlines al JOIN flights f "
               "ON f.airline_id = al.id GROUP BY al.id, al.name"),
        (MISS, "SELECT al.name, AVG(b.paid) FROM flights f JOIN airlines al ON al.id = f.airline_id "
               "JOIN bookings b ON b.flight_id = f.id GROUP BY al.name"),
        (MISS, "SELECT al.name, AVG(f.price) FROM flights f JOIN airlines al "
               "ON al.id = f.airline_id WHERE f.delay_min IS NOT NULL GROUP BY al.name"),
    ]),
    ("SELECT origin, id FROM (SELECT origin, id, ROW_NUMBER() OVER (PARTITION BY origin "
     "ORDER BY duration_min DESC, id) AS r FROM flights) WHERE r = 1 ORDER BY origin", [
        (SAME, "SELECT f.origin, MIN(f.id) FROM flights f WHERE f.duration_min = "
               "(SELECT MAX(g.duration_min) FROM flights g WHERE g.origin = f.origin) "
               "GROUP BY f.origin ORDER BY f.origin"),
        (MISS, "SELECT origin, id FROM (SELECT origin, id, ROW_NUMBER() OVER (PARTITION BY "
               "origin ORDER BY price DESC, id) AS r FROM flights) WHERE r = 1 ORDER BY origin"),
        (MISS, "SELECT origin, id FROM (SELECT origin, id, ROW_NUMBER() OVER (PARTITION BY "
               "origin ORDER BY duration_min, id) AS r FROM flights) WHERE r = 1 ORDER BY origin"),
    ]),
    ("SELECT COUNT(*) FROM passengers WHERE id NOT IN (SELECT passenger_id FROM bookings)", [
        (SAME, "SELECT COUNT(*) FROM passengers p WHERE NOT EXISTS "
               "(SELECT 1 FROM bookings b WHERE b.passenger_id = p.id)"),
        (MISS, "SELECT COUNT(DISTINCT passenger_id) FROM bookings"),
        (MISS, "SELECT COUNT(*) FROM passengers WHERE frequent_flyer = 0"),
    ]),
]  # fmt: skip

HOSPITAL = [
    ("SELECT DISTINCT pr.drug FROM visits v JOIN prescriptions pr ON pr.visit_id = v.id "
     "WHERE v.patient_id = {busiest}", [
        (SAME, "SELECT drug FROM prescriptions WHERE visit_id IN "
               "(SELECT id FROM visits WHERE patient_id = {busiest}) GROUP BY drug"),
        (MISS, "SELECT pr.drug FROM visits v JOIN prescriptions pr ON pr.visit_id = v.id "
               "WHERE v.patient_id = {busiest} UNION ALL SELECT 'aspirin'"),
    ]),
    ("SELECT d.specialty, SUM(v.cost) FROM visits v JOIN doctors d ON d.id = v.doctor_id "
     "GROUP BY d.specialty", [
        (SAME, "SELECT specialty, total FROM (SELECT d.specialty, SUM(v.cost) AS total FROM "
               "doctors d JOIN visits v ON v.doctor_id = d.id GROUP BY d.specialty) AS t"),
        (MISS, "SELECT d.specialty, SUM(v.cost) FROM visits v JOIN doctors d "
               "ON d.id = v.doctor_id WHERE v.diagnosis IS NOT NULL GROUP BY d.specialty"),
        (MISS, "SELECT d.specialty, SUM(v.cost) FROM visits v JOIN doctors d "
               "ON d.id = v.patient_id GROUP BY d.specialty"),
    ]),
    ("SELECT visit_date, LAG(visit_date) OVER (ORDER BY visit_date, id) FROM visits "
     "WHERE patient_id = {busiest} ORDER BY visit_date, id", [
        (SAME, "SELECT v.visit_date, (SELECT w.visit_date FROM visits w WHERE w.patient_id = {busiest} "
               "AND (w.visit_date < v.visit_date OR (w.visit_date = v.visit_date AND w.id < v.id)) "
               "ORDER BY w.visit_date DESC, w.id DESC LIMIT 1) FROM visits v "
               "WHERE v.patient_id = {busiest} ORDER BY v.visit_date, v.id"),
        (MISS, "SELECT visit_date, LEAD(visit_date) OVER (ORDER BY visit_date, id) FROM visits "
               "WHERE patient_id = {busiest} ORDER BY visit_date, id"),
        (MISS, "SELECT visit_date, LAG(visit_date) OVER (ORDER BY visit_date, id) FROM visits "
               "WHERE patient_id = {busiest} ORDER BY visit_date DESC, id"),
    ]),
    ("SELECT d.name, s.name FROM doctors d JOIN doctors s ON s.id = d.supervisor_id", [
        (SAME, "SELECT d.name, (SELECT s.name FROM doctors s WHERE s.id = d.supervisor_id) "
               "FROM doctors d WHERE d.supervisor_id IS NOT NULL"),
        (SAME, "SELECT s.name, d.name FROM doctors s JOIN doctors d ON d.supervisor_id = s.id"),
        (MISS, "SELECT d.name, s.name FROM doctors d JOIN doctors s ON s.id = d.id "
               "WHERE d.supervisor_id IS NOT NULL"),
    ]),
]  # fmt: skip

LIBRARY = [
    ("SELECT b.genre, COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id GROUP BY b.genre", [
        (SAME, "SELECT genre, COUNT(l.id) FROM books b JOIN loans l ON l.book_id = b.id "
               "GROUP BY genre"),
        (MISS, "SELECT b.genre, COUNT(DISTINCT l.book_id) FROM loans l JOIN books b "
               "ON b.id = l.book_id GROUP BY b.genre"),
        (MISS, "SELECT b.genre, COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id "
               "WHERE l.return_date IS NOT NULL GROUP BY b.genre"),
    ]),
    ("SELECT COUNT(*) FROM loans WHERE return_date IS NULL", [
        (SAME, "SELECT COUNT(*) - COUNT(return_date) FROM loans"),
        (MISS, "SELECT COUNT(return_date) FROM loans"),
        (MISS, "SELECT COUNT(*) FROM loans WHERE return_date > loan_date"),
    ]),
    ("WITH counts AS (SELECT member_id, COUNT(*) AS n FROM loans GROUP BY member_id) "
     "SELECT member_id, n FROM counts ORDER BY n DESC, member_id LIMIT 3", [
        (SAME, "SELECT member_id, COUNT(*) FROM loans GROUP BY member_id "
               "ORDER BY COUNT(*) DESC, member_id LIMIT 3"),
        (MISS, "SELECT member_id, COUNT(*) FROM loans GROUP BY member_id "
               "ORDER BY COUNT(*) DESC, member_id LIMIT 4"),
        (MISS, "SELECT member_id, COUNT(*) FROM loans GROUP BY member_id "
               "ORDER BY COUNT(*), member_id LIMIT 3"),
    ]),
    ("SELECT id FROM books EXCEPT SELECT book_id FROM loans", [
        (SAME, "SELECT b.id FROM books b LEFT JOIN loans l ON l.book_id = b.id "
               "WHERE l.id IS NULL"),
        (MISS, "SELECT book_id FROM loans WHERE return_date IS NULL"),
    ]),
]  # fmt: skip

PAIRS = [
    (domain, gold, predicted, label)
    for domain, suite in [
        ("shop", SHOP),
        ("school", SCHOOL),
        ("flights", FLIGHTS),
        ("hospital", HOSPITAL),
        ("library", LIBRARY),
    ]
    for gold, rewrites in suite
    for label, predicted in rewrites
]
PAIRS = [
    (d, g.replace("{busiest}", BUSIEST), p.replace("{busiest}", BUSIEST), label)
    for d, g, p, label in PAIRS
]


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
@pytest.mark.parametrize(
    ("domain", "gold", "predicted", "equivalent"),
    PAIRS,
    ids=[f"{d}-{'same' if label else 'miss'}-{i}" for i, (d, _, _, label) in enumerate(PAIRS)],
)
def test_labelled_pair(backend, domain, gold, predicted, equivalent):
    if backend == "duckdb":
        pytest.importorskip("duckdb", reason="needs the 'duckdb' extra")
    for seed in (0, 1):
        path = database_path(domain, seed)
        rows = SQLiteDatabase(path).query(gold).rows
        assert len(rows) >= 2 or rows[0][0] not in (None, 0), (
            "a pair on an empty gold proves nothing"
        )
        got = execution_match(predicted, gold, path, backend=backend, dialect="sqlite")
        assert got == float(equivalent), (seed, "false positive" if got else "false negative")


def test_the_suite_is_balanced():
    rewrites = sum(label for *_, label in PAIRS)
    assert rewrites >= 25 and len(PAIRS) - rewrites >= 35


SAME_PAIRS = [(d, g, p) for d, g, p, label in PAIRS if label]


@pytest.mark.parametrize(("domain", "gold", "predicted"), SAME_PAIRS)
def test_equivalent_rewrites_still_score_1_on_the_test_suite(domain, gold, predicted):
    suite = suite_paths(domain, DEFAULT_SUITE)
    assert execution_match(predicted, gold, database_path(domain, 0), suite=suite) == 1.0
