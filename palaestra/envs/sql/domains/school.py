"""School: teachers, students (with advisors), courses (with prerequisites), enrollments."""

from __future__ import annotations

import datetime as dt
import sqlite3

import numpy as np

from palaestra.envs.sql.domains.base import Gen, Intent, insert

SCHEMA = """
CREATE TABLE teachers (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    department TEXT NOT NULL, hired DATE NOT NULL);
CREATE TABLE students (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    year INTEGER NOT NULL, birth_date DATE NOT NULL,
    advisor_id INTEGER REFERENCES teachers(id));
CREATE TABLE courses (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
    department TEXT NOT NULL, credits INTEGER NOT NULL,
    teacher_id INTEGER REFERENCES teachers(id), prerequisite_id INTEGER REFERENCES courses(id));
CREATE TABLE enrollments (student_id INTEGER NOT NULL REFERENCES students(id),
    course_id INTEGER NOT NULL REFERENCES courses(id), term TEXT NOT NULL,
    grade REAL, PRIMARY KEY (student_id, course_id, term));
"""
DEPARTMENTS = ("Mathematics", "History", "Biology", "Literature", "Physics", "Music")
TOPICS = (
    "Algebra", "Ancient Rome", "Genetics", "Poetry", "Optics", "Harmony", "Statistics",
    "Ecology", "Novels of the 19th century", "Mechanics", "Jazz", "Cell Biology",
)  # fmt: skip
TERMS = ("2022-S1", "2022-S2", "2023-S1", "2023-S2")
"""Terms sort in time order; the last one is under way (most grades not in yet)."""


def build(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript(SCHEMA)
    t = g.size(40)
    teachers = list(range(1, t + 1))
    departments = g.skewed(g.shuffled(DEPARTMENTS), t, 1.2)
    insert(
        c, "teachers", [teachers, g.names(t), departments, g.dates(dt.date(2000, 1, 1), 8000, t)]
    )
    n = g.size(600)
    students = list(range(1, n + 1))
    insert(c, "students", [
        students, g.names(n), g.ints(1, 4, n), g.dates(dt.date(2003, 1, 1), 1500, n),
        g.nulls(g.choice(teachers, n), 0.2),
    ])  # fmt: skip
    m = g.size(48)
    courses = list(range(1, m + 1))
    taught_by = g.choice(teachers, m)
    titles = [f"{topic} {100 + i}" for topic, i in zip(g.choice(TOPICS, m), courses, strict=True)]
    prerequisites = [int(i * u) or None for i, u in zip(courses, g.rng.random(m), strict=True)]
    insert(c, "courses", [
        courses, titles, [departments[k - 1] for k in taught_by], g.choice((2, 3, 4, 6), m),
        g.nulls(taught_by, 0.05), g.nulls(prerequisites, 0.5),
    ])  # fmt: skip
    taken = g.subsets(courses, g.ints(2, 7, n))
    rows = [(s, course) for s, chosen in zip(students, taken, strict=True) for course in chosen]
    terms = g.choice(TERMS, len(rows))
    grades = np.round(g.rng.triangular(40, 78, 100, len(rows)), 1).tolist()
    late = g.rng.random(len(rows)) < 0.6
    grades = [
        None if term == TERMS[-1] and gone else grade
        for term, gone, grade in zip(terms, late, grades, strict=True)
    ]
    insert(c, "enrollments", [[s for s, _ in rows], [k for _, k in rows], terms, grades])


_TERM = "SELECT term FROM enrollments WHERE grade IS NOT NULL"

INTENTS = {
    "students_born_in_month": Intent(
        1,
        (
            "List the names of the students in year {year} who were born in {month} "
            "(year-month), one row per student (names can repeat).",
            "Which year-{year} students have a birth date in {month}? Names, one row per student.",
        ),
        "SELECT name FROM students WHERE year = {year} AND strftime('%Y-%m', birth_date) = {month}",
        {
            "year": "SELECT year FROM students",
            "month": "SELECT strftime('%Y-%m', birth_date) FROM students WHERE year = {year}",
        },
    ),
    "courses_with_credits": Intent(
        1,
        (
            "Which courses of the {department} department are worth at least {credits} "
            "credits? Give their titles.",
            "Titles of the {department} courses carrying {credits} credits or more.",
        ),
        "SELECT title FROM courses WHERE department = {department} AND credits >= {credits}",
        {
            "department": "SELECT department FROM courses",
            "credits": "SELECT credits FROM courses WHERE department = {department}",
        },
    ),
    "teachers_hired_between": Intent(
        1,
        (
            "Which teachers were hired between {start} and {end}, both days included? Give "
            "their names and departments, one row per teacher.",
            "Name and department of every teacher whose hiring date is from {start} to {end} "
            "(one row per teacher).",
        ),
        "SELECT name, department FROM teachers WHERE hired BETWEEN {start} AND {end}",
        {
            "start": "SELECT hired FROM teachers",
            "end": "SELECT hired FROM teachers WHERE hired >= {start}",
        },
    ),
    "grade_letters": Intent(
        1,
        (
            "For course {course_id} in term {term}, give each graded student's id and a "
            "letter, one row per student: 'A' for a grade of 90 or more, 'B' from 75 to "
            "under 90, 'C' below 75.",
            "Letter grades of course {course_id}, term {term}, one row per student: student "
            "id, then A (90 and up), B (75 up to 90) or C (under 75); ungraded enrollments "
            "left out.",
        ),
        "SELECT student_id, CASE WHEN grade >= 90 THEN 'A' WHEN grade >= 75 THEN 'B' "
        "ELSE 'C' END FROM enrollments WHERE course_id = {course_id} AND term = {term} "
        "AND grade IS NOT NULL",
        {
            "course_id": "SELECT course_id FROM enrollments WHERE grade IS NOT NULL",
            "term": "SELECT term FROM enrollments WHERE course_id = {course_id} "
            "AND grade IS NOT NULL",
        },
    ),
    "courses_titled": Intent(
        1,
        (
            "Which courses of the {department} department have '{word}' in their title? "
            "Give id and title.",
            "Id and title of the {department} courses whose title contains the word {word}.",
        ),
        "SELECT id, title FROM courses WHERE department = {department} "
        "AND title LIKE '%' || {word} || '%'",
        {
            "department": "SELECT department FROM courses",
            "word": "SELECT substr(title, 1, instr(title, ' ') - 1) FROM courses "
            "WHERE department = {department}",
        },
    ),
    "courses_of_teacher": Intent(
        2,
        (
            "Which courses does {name} teach? Give the course titles.",
            "Titles of the courses taught by {name}.",
        ),
        "SELECT c.title FROM courses c JOIN teachers t ON t.id = c.teacher_id "
        "WHERE t.name = {name}",
        {
            "name": "SELECT t.name FROM teachers t JOIN courses c ON c.teacher_id = t.id "
            "GROUP BY t.name HAVING COUNT(DISTINCT t.id) = 1"
        },
    ),
    "students_in_course_term": Intent(
        2,
        (
            "Which students took '{title}' in term {term}? Give their names, one row per student.",
            "Names of the students enrolled in the course '{title}' during {term} (one row "
            "per student; names can repeat).",
        ),
        "SELECT s.name FROM enrollments e JOIN students s ON s.id = e.student_id "
        "JOIN courses c ON c.id = e.course_id WHERE c.title = {title} AND e.term = {term}",
        {
            "title": "SELECT title FROM courses",
            "term": "SELECT e.term FROM enrollments e JOIN courses c ON c.id = e.course_id "
            "WHERE c.title = {title}",
        },
    ),
    "prerequisites_across_departments": Intent(
        2,
        (
            "Which {department} courses have a prerequisite course from the {other} "
            "department? Give each course's title and its prerequisite's title.",
            "Courses of the {department} department whose prerequisite belongs to "
            "{other}: course title, prerequisite title.",
        ),
        "SELECT c.title, p.title FROM courses c JOIN courses p ON p.id = c.prerequisite_id "
        "WHERE c.department = {department} AND p.department = {other}",
        {
            "department": "SELECT department FROM courses WHERE prerequisite_id IS NOT NULL",
            "other": "SELECT p.department FROM courses c JOIN courses p "
            "ON p.id = c.prerequisite_id WHERE c.department = {department}",
        },
    ),
    "advisees_by_department": Intent(
        2,
        (
            "List the year-{year} students whose advisor works in the {department} "
            "department: student name and advisor name, one row per student.",
            "For each student in year {year} advised by a {department} teacher, give the "
            "student's name and the advisor's name (one row per student).",
        ),
        "SELECT s.name, t.name FROM students s JOIN teachers t ON t.id = s.advisor_id "
        "WHERE s.year = {year} AND t.department = {department}",
        {"year": "SELECT year FROM students", "department": "SELECT department FROM teachers"},
    ),
    "average_grade_by_department": Intent(
        3,
        (
            "What is the average grade per course department for students in year {year} "
            "in term {term}, counting graded enrollments only? Department and average.",
            "Per department of the course: the mean of the known grades of year-{year} "
            "students in {term}.",
        ),
        "SELECT c.department, AVG(e.grade) FROM enrollments e "
        "JOIN courses c ON c.id = e.course_id JOIN students s ON s.id = e.student_id "
        "WHERE e.grade IS NOT NULL AND s.year = {year} AND e.term = {term} "
        "GROUP BY c.department",
        {"year": "SELECT year FROM students", "term": _TERM},
    ),
    "crowded_courses": Intent(
        3,
        (
            "Which courses had more than {n} enrollments in term {term}? Give course id and "
            "the number of enrollments.",
            "Courses with over {n} students enrolled during {term}: course id, enrollments.",
        ),
        "SELECT course_id, COUNT(*) FROM enrollments WHERE term = {term} "
        "GROUP BY course_id HAVING COUNT(*) > {n}",
        {
            "term": "SELECT term FROM enrollments",
            "n": "SELECT COUNT(*) - 1 FROM enrollments WHERE term = {term} GROUP BY course_id",
        },
    ),
    "passes_and_fails": Intent(
        3,
        (
            "For each course department, how many graded enrollments of term {term} have a "
            "grade of at least {mark}, and how many are below it? Department, passes, fails.",
            "Per department, in {term}: the number of grades at or above {mark}, then the "
            "number under {mark} (ungraded enrollments not counted).",
        ),
        "SELECT c.department, SUM(CASE WHEN e.grade >= {mark} THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN e.grade < {mark} THEN 1 ELSE 0 END) FROM enrollments e "
        "JOIN courses c ON c.id = e.course_id WHERE e.term = {term} AND e.grade IS NOT NULL "
        "GROUP BY c.department",
        {"term": _TERM, "mark": "SELECT 50 UNION SELECT 60 UNION SELECT 70 UNION SELECT 80"},
    ),
    "credits_per_student": Intent(
        3,
        (
            "How many credits did each year-{year} student enroll in during {term}? Give "
            "student id and total credits, for students with at least one enrollment then.",
            "Total course credits per student in year {year} for term {term}: student id, credits.",
        ),
        "SELECT e.student_id, SUM(c.credits) FROM enrollments e "
        "JOIN courses c ON c.id = e.course_id JOIN students s ON s.id = e.student_id "
        "WHERE s.year = {year} AND e.term = {term} GROUP BY e.student_id",
        {"year": "SELECT year FROM students", "term": "SELECT term FROM enrollments"},
    ),
    "never_took_department": Intent(
        4,
        (
            "Which students in year {year} never took a course of the {department} "
            "department? Give their ids.",
            "Ids of the year-{year} students with no enrollment at all in {department} courses.",
        ),
        "SELECT id FROM students WHERE year = {year} EXCEPT SELECT e.student_id "
        "FROM enrollments e JOIN courses c ON c.id = e.course_id "
        "WHERE c.department = {department}",
        {"year": "SELECT year FROM students", "department": "SELECT department FROM courses"},
    ),
    "took_both_courses": Intent(
        4,
        (
            "Which students took both course {first} and course {second}? Give their ids.",
            "Ids of the students enrolled (in any term) in course {first} and also in "
            "course {second}.",
        ),
        "SELECT student_id FROM enrollments WHERE course_id = {first} INTERSECT "
        "SELECT student_id FROM enrollments WHERE course_id = {second}",
        {
            "first": "SELECT course_id FROM enrollments",
            "second": "SELECT b.course_id FROM enrollments a JOIN enrollments b "
            "ON b.student_id = a.student_id WHERE a.course_id = {first} "
            "AND b.course_id <> {first}",
        },
    ),
    "above_course_average": Intent(
        4,
        (
            "In term {term}, which enrollments in {department} courses have a grade above "
            "the average grade of the same course in that term? Give student id and course "
            "id.",
            "Student id and course id of every {department} enrollment in {term} graded "
            "higher than that course's mean grade for the term.",
        ),
        "SELECT e.student_id, e.course_id FROM enrollments e "
        "JOIN courses c ON c.id = e.course_id WHERE e.term = {term} "
        "AND c.department = {department} AND e.grade > (SELECT AVG(x.grade) "
        "FROM enrollments x WHERE x.course_id = e.course_id AND x.term = e.term)",
        {"term": _TERM, "department": "SELECT department FROM courses"},
    ),
    "above_year_average": Intent(
        4,
        (
            "Which students in year {year} have an average grade above the average of the "
            "students' averages in year {year}? Ungraded enrollments do not count. Ids.",
            "Ids of the year-{year} students whose mean grade beats the mean of the "
            "per-student mean grades of their year (known grades only).",
        ),
        "SELECT e.student_id FROM enrollments e JOIN students s ON s.id = e.student_id "
        "WHERE s.year = {year} AND e.grade IS NOT NULL GROUP BY e.student_id "
        "HAVING AVG(e.grade) > (SELECT AVG(mean) FROM (SELECT AVG(x.grade) AS mean "
        "FROM enrollments x JOIN students y ON y.id = x.student_id WHERE y.year = {year} "
        "AND x.grade IS NOT NULL GROUP BY x.student_id) AS means)",
        {"year": "SELECT year FROM students"},
    ),
    "course_ranking": Intent(
        5,
        (
            "For course {course_id} in term {term}, rank the graded students, best grade "
            "first; equal grades share a rank and the next rank skips accordingly. Give "
            "student id, grade and rank, ordered by rank and then student id.",
            "Standings of course {course_id} for {term}: student id, grade, place (1 = best; "
            "ties share a place, and the following place counts them), sorted by place, "
            "then id.",
        ),
        "SELECT student_id, grade, RANK() OVER (ORDER BY grade DESC) AS place "
        "FROM enrollments WHERE course_id = {course_id} AND term = {term} "
        "AND grade IS NOT NULL ORDER BY place, student_id",
        {
            "course_id": "SELECT course_id FROM enrollments WHERE grade IS NOT NULL "
            "GROUP BY course_id, term HAVING COUNT(*) >= 3",
            "term": "SELECT term FROM enrollments WHERE course_id = {course_id} "
            "AND grade IS NOT NULL GROUP BY term HAVING COUNT(*) >= 3",
        },
    ),
    "best_student_per_department": Intent(
        5,
        (
            "For each course department, which student had the highest average grade over "
            "that department's courses in {term}? Give department, student id and the "
            "average, ordered by department; list every student who ties.",
            "Top student of each department in {term} by mean grade across the "
            "department's courses: department, student id, mean, by department (all tied "
            "students).",
        ),
        "WITH means AS (SELECT c.department, e.student_id, AVG(e.grade) AS mean "
        "FROM enrollments e JOIN courses c ON c.id = e.course_id "
        "WHERE e.term = {term} AND e.grade IS NOT NULL GROUP BY c.department, e.student_id), "
        "ranked AS (SELECT department, student_id, mean, RANK() OVER "
        "(PARTITION BY department ORDER BY mean DESC) AS place FROM means) "
        "SELECT department, student_id, mean FROM ranked WHERE place = 1 ORDER BY department",
        {"term": _TERM},
    ),
    "grade_trend": Intent(
        5,
        (
            "For student {student_id}, list each graded enrollment's term, course id and "
            "grade with the grade of the graded enrollment before it (NULL for the first), "
            "in term order and then course id.",
            "Graded enrollments of student {student_id} in order of term, then course id: "
            "term, course id, grade, previous grade (NULL at first).",
        ),
        "SELECT term, course_id, grade, LAG(grade) OVER (ORDER BY term, course_id) "
        "FROM enrollments WHERE student_id = {student_id} AND grade IS NOT NULL "
        "ORDER BY term, course_id",
        {
            "student_id": "SELECT student_id FROM enrollments WHERE grade IS NOT NULL "
            "GROUP BY student_id HAVING COUNT(*) >= 2"
        },
    ),
    "running_credits": Intent(
        5,
        (
            "For student {student_id}, give each term they enrolled in (in order), the "
            "credits of that term's courses, and the running total of credits so far.",
            "Term by term for student {student_id}: term, credits taken that term, and "
            "cumulative credits, ordered by term.",
        ),
        "WITH per_term AS (SELECT e.term, SUM(c.credits) AS credits FROM enrollments e "
        "JOIN courses c ON c.id = e.course_id WHERE e.student_id = {student_id} "
        "GROUP BY e.term) SELECT term, credits, SUM(credits) OVER (ORDER BY term) "
        "FROM per_term ORDER BY term",
        {"student_id": "SELECT student_id FROM enrollments"},
    ),
}
