"""Library: authors, books, members (some referred by another) and loans."""

from __future__ import annotations

import datetime as dt
import sqlite3

from palaestra.envs.sql.domains.base import CITIES, Gen, Intent, calendar, insert

SCHEMA = """
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT,
    born INTEGER);
CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
    author_id INTEGER NOT NULL REFERENCES authors(id), year INTEGER NOT NULL,
    genre TEXT NOT NULL, pages INTEGER NOT NULL);
CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,
    joined DATE NOT NULL, referred_by INTEGER REFERENCES members(id));
CREATE TABLE loans (id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(id),
    member_id INTEGER NOT NULL REFERENCES members(id), loan_date DATE NOT NULL,
    return_date DATE);
"""
COUNTRIES = ("Ireland", "Poland", "Brazil", "Japan", "Nigeria", "Iceland", "France", "India")
WORDS = (
    "Night", "River", "Glass", "Garden", "Salt", "Winter", "Atlas", "Echo", "Harbour",
    "Lantern", "Orchard", "Storm", "Mirror", "Ember", "Tide", "Ballad",
)  # fmt: skip
GENRES = ("novel", "poetry", "history", "science", "mystery", "fantasy", "biography")


def build(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript(SCHEMA)
    a = g.size(120)
    authors = list(range(1, a + 1))
    insert(c, "authors", [
        authors, g.names(a), g.nulls(g.choice(COUNTRIES, a), 0.1),
        g.nulls(g.ints(1890, 1995, a), 0.15),
    ])  # fmt: skip
    n = g.size(900)
    books = list(range(1, n + 1))
    firsts, seconds, forms = g.choice(WORDS, n), g.choice(WORDS, n), g.rng.random(n)
    titles = [
        f"The {x} of {y}" if form < 0.5 else f"{x}'s {y}"
        for x, y, form in zip(firsts, seconds, forms, strict=True)
    ]
    insert(c, "books", [
        books, titles, g.skewed(g.shuffled(authors), n, 1.1), g.ints(1920, 2024, n),
        g.skewed(g.shuffled(GENRES), n, 1.3), g.ints(80, 900, n),
    ])  # fmt: skip
    m = g.size(400)
    members = list(range(1, m + 1))
    referrers = [int(i * u) or None for i, u in zip(members, g.rng.random(m), strict=True)]
    insert(c, "members", [
        members, g.names(m), g.skewed(g.shuffled(CITIES), m, 1.2),
        g.dates(dt.date(2015, 1, 1), 3000, m), g.nulls(referrers, 0.75),
    ])  # fmt: skip
    k = g.size(5000)
    days = calendar(dt.date(2022, 1, 1), 760)
    starts = g.ints(0, 699, k)
    returns = [days[start + length] for start, length in zip(starts, g.ints(1, 60, k), strict=True)]
    insert(c, "loans", [
        list(range(1, k + 1)), g.skewed(g.shuffled(books), k, 1.05),
        g.skewed(g.shuffled(members), k, 1.05), [days[i] for i in starts],
        g.nulls(returns, 0.12),
    ])  # fmt: skip


_YEAR = "SELECT strftime('%Y', loan_date) FROM loans"
_MONTH = "SELECT strftime('%Y-%m', loan_date) FROM loans"

INTENTS = {
    "books_by_genre_after": Intent(
        1,
        (
            "List the titles of the {genre} books published after {year}, one row per book "
            "(titles can repeat).",
            "Which {genre} books came out later than {year}? Titles, one row per book.",
        ),
        "SELECT title FROM books WHERE genre = {genre} AND year > {year}",
        {
            "genre": "SELECT genre FROM books",
            "year": "SELECT year FROM books WHERE genre = {genre} AND year < 2024",
        },
    ),
    "members_joined_between": Intent(
        1,
        (
            "Which members from {city} joined between {start} and {end}, both days "
            "included? Give id and name.",
            "Id and name of the members living in {city} with a join date from {start} to {end}.",
        ),
        "SELECT id, name FROM members WHERE city = {city} AND joined BETWEEN {start} AND {end}",
        {
            "city": "SELECT city FROM members",
            "start": "SELECT joined FROM members WHERE city = {city}",
            "end": "SELECT joined FROM members WHERE city = {city} AND joined >= {start}",
        },
    ),
    "titles_with_word": Intent(
        1,
        (
            "Which {genre} books have the word '{word}' in their title? Give id and title.",
            "Id and title of every {genre} book whose title contains {word}.",
        ),
        "SELECT id, title FROM books WHERE genre = {genre} AND title LIKE '%' || {word} || '%'",
        {
            "genre": "SELECT genre FROM books",
            "word": "SELECT substr(title, 5, instr(substr(title, 5), ' ') - 1) FROM books "
            "WHERE title LIKE 'The %' AND genre = {genre}",
        },
    ),
    "length_labels": Intent(
        1,
        (
            "For the {genre} books published in {year}, give id, pages and 'long' when the "
            "book has more than {pages} pages, else 'short'.",
            "{genre} books from {year}: id, page count, and long (over {pages} pages) or short.",
        ),
        "SELECT id, pages, CASE WHEN pages > {pages} THEN 'long' ELSE 'short' END "
        "FROM books WHERE genre = {genre} AND year = {year}",
        {
            "genre": "SELECT genre FROM books",
            "year": "SELECT year FROM books WHERE genre = {genre}",
            "pages": "SELECT 200 UNION SELECT 300 UNION SELECT 500",
        },
    ),
    "open_loans_in_month": Intent(
        1,
        (
            "Which loans made in {month} (year-month) have not been returned? Give loan id "
            "and book id.",
            "Loans started during {month} that are still out: loan id, book id.",
        ),
        "SELECT id, book_id FROM loans WHERE return_date IS NULL "
        "AND strftime('%Y-%m', loan_date) = {month}",
        {"month": _MONTH + " WHERE return_date IS NULL"},
    ),
    "books_of_author": Intent(
        2,
        (
            "Which books did {name} write? Give the titles, one row per book.",
            "Titles written by {name}, one row per book (titles can repeat).",
        ),
        "SELECT b.title FROM books b JOIN authors a ON a.id = b.author_id WHERE a.name = {name}",
        {
            "name": "SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id "
            "GROUP BY a.name HAVING COUNT(DISTINCT a.id) = 1"
        },
    ),
    "loans_of_member_in_year": Intent(
        2,
        (
            "Which books did member {member_id} borrow in {year}? Give loan date and title, "
            "one row per loan.",
            "Loans of member {member_id} dated {year}: loan date and book title (one row per "
            "loan).",
        ),
        "SELECT l.loan_date, b.title FROM loans l JOIN books b ON b.id = l.book_id "
        "WHERE l.member_id = {member_id} AND strftime('%Y', l.loan_date) = {year}",
        {
            "member_id": "SELECT member_id FROM loans",
            "year": _YEAR + " WHERE member_id = {member_id}",
        },
    ),
    "referred_members": Intent(
        2,
        (
            "Which members living in {city} were referred by another member? Give each "
            "member's name and the referrer's name, one row per referred member.",
            "For every referred member from {city}: their name and the name of the member "
            "who referred them (one row per referred member).",
        ),
        "SELECT m.name, r.name FROM members m JOIN members r ON r.id = m.referred_by "
        "WHERE m.city = {city}",
        {"city": "SELECT city FROM members WHERE referred_by IS NOT NULL"},
    ),
    "borrowers_of_genre_in_month": Intent(
        2,
        (
            "Which members borrowed a {genre} book in {month} (year-month)? Give each "
            "member id once.",
            "Distinct ids of the members with a loan of a {genre} book during {month}.",
        ),
        "SELECT DISTINCT l.member_id FROM loans l JOIN books b ON b.id = l.book_id "
        "WHERE b.genre = {genre} AND strftime('%Y-%m', l.loan_date) = {month}",
        {"genre": "SELECT genre FROM books", "month": _MONTH},
    ),
    "loans_per_genre": Intent(
        3,
        (
            "How many loans were made per book genre in {year} by members living in {city}? "
            "Genre and count.",
            "Number of loans of each genre during {year}, counting members from {city} only.",
        ),
        "SELECT b.genre, COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id "
        "JOIN members m ON m.id = l.member_id WHERE strftime('%Y', l.loan_date) = {year} "
        "AND m.city = {city} GROUP BY b.genre",
        {"year": _YEAR, "city": "SELECT city FROM members"},
    ),
    "heavy_borrowers": Intent(
        3,
        (
            "Which members borrowed more than {n} books in {year}? Give member id and the "
            "number of loans.",
            "Members with over {n} loans during {year}: id, loans.",
        ),
        "SELECT member_id, COUNT(*) FROM loans WHERE strftime('%Y', loan_date) = {year} "
        "GROUP BY member_id HAVING COUNT(*) > {n}",
        {
            "year": _YEAR,
            "n": "SELECT COUNT(*) - 1 FROM loans WHERE strftime('%Y', loan_date) = {year} "
            "GROUP BY member_id",
        },
    ),
    "returned_or_not_by_genre": Intent(
        3,
        (
            "For each genre, how many loans made in {month} (year-month) have been returned "
            "and how many have not? Genre, returned, not returned.",
            "Per book genre, loans of {month}: the number returned, then the number still out.",
        ),
        "SELECT b.genre, SUM(CASE WHEN l.return_date IS NOT NULL THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN l.return_date IS NULL THEN 1 ELSE 0 END) FROM loans l "
        "JOIN books b ON b.id = l.book_id WHERE strftime('%Y-%m', l.loan_date) = {month} "
        "GROUP BY b.genre",
        {"month": _MONTH},
    ),
    "pages_by_genre_for_country": Intent(
        3,
        (
            "What is the average number of pages per genre of the books by authors from "
            "{country}? Genre and average.",
            "Mean page count for each genre, over books written by {country} authors.",
        ),
        "SELECT b.genre, AVG(b.pages) FROM books b JOIN authors a ON a.id = b.author_id "
        "WHERE a.country = {country} GROUP BY b.genre",
        {"country": "SELECT country FROM authors WHERE country IS NOT NULL"},
    ),
    "unread_in_year": Intent(
        4,
        (
            "Which {genre} books were not borrowed at all in {year}? Give their ids.",
            "Ids of the {genre} books without a single loan dated {year}.",
        ),
        "SELECT id FROM books WHERE genre = {genre} EXCEPT "
        "SELECT book_id FROM loans WHERE strftime('%Y', loan_date) = {year}",
        {"genre": "SELECT genre FROM books", "year": _YEAR},
    ),
    "read_both_genres": Intent(
        4,
        (
            "Which members from {city} borrowed both a {first} book and a {second} book? "
            "Give their ids.",
            "Ids of the members living in {city} with loans of {first} books and of {second} "
            "books.",
        ),
        "SELECT l.member_id FROM loans l JOIN books b ON b.id = l.book_id "
        "JOIN members m ON m.id = l.member_id WHERE m.city = {city} AND b.genre = {first} "
        "INTERSECT SELECT l.member_id FROM loans l JOIN books b ON b.id = l.book_id "
        "WHERE b.genre = {second}",
        {
            "city": "SELECT city FROM members",
            "first": "SELECT genre FROM books",
            "second": "SELECT genre FROM books WHERE genre <> {first}",
        },
    ),
    "longer_than_author_average": Intent(
        4,
        (
            "Which {genre} books are longer than the average length of their author's "
            "books? Give id, title and pages.",
            "{genre} books with more pages than the mean page count of all books by the same "
            "author: id, title, pages.",
        ),
        "SELECT b.id, b.title, b.pages FROM books b WHERE b.genre = {genre} AND b.pages > "
        "(SELECT AVG(x.pages) FROM books x WHERE x.author_id = b.author_id)",
        {"genre": "SELECT genre FROM books"},
    ),
    "avid_members_in_city": Intent(
        4,
        (
            "Which members from {city} made more loans than the average member from {city} "
            "who borrowed? Give their ids.",
            "Among members living in {city} with loans, the ids of those with more loans "
            "than the group's average.",
        ),
        "SELECT l.member_id FROM loans l JOIN members m ON m.id = l.member_id "
        "WHERE m.city = {city} GROUP BY l.member_id HAVING COUNT(*) > "
        "(SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM loans x JOIN members y "
        "ON y.id = x.member_id WHERE y.city = {city} GROUP BY x.member_id) AS counts)",
        {"city": "SELECT city FROM members"},
    ),
    "top_member_per_city": Intent(
        5,
        (
            "For each city, which member borrowed the most {genre} books in {year}? Give "
            "city, member id and number of loans, ordered by city; the lower id wins a tie.",
            "Per city, the member with the most loans of {genre} books during {year} (lowest "
            "id if tied): city, member id, loans, sorted by city.",
        ),
        "WITH counts AS (SELECT m.city, l.member_id, COUNT(*) AS n FROM loans l "
        "JOIN members m ON m.id = l.member_id JOIN books b ON b.id = l.book_id "
        "WHERE b.genre = {genre} AND strftime('%Y', l.loan_date) = {year} "
        "GROUP BY m.city, l.member_id), ranked AS (SELECT city, member_id, n, "
        "ROW_NUMBER() OVER (PARTITION BY city ORDER BY n DESC, member_id) AS place "
        "FROM counts) SELECT city, member_id, n FROM ranked WHERE place = 1 ORDER BY city",
        {"genre": "SELECT genre FROM books", "year": _YEAR},
    ),
    "genre_loan_ranking": Intent(
        5,
        (
            "Rank the {genre} books by how often they were borrowed in {year}, most first; "
            "equal counts share a rank and the next rank skips. Give book id, loans and "
            "rank for ranks 1 to 5, ordered by rank and then book id.",
            "{genre} books by loans in {year} (1 = most borrowed, ties share a place and the "
            "following place counts them): id, loans, place, places up to 5, by place then id.",
        ),
        "WITH counts AS (SELECT b.id, COUNT(*) AS n FROM loans l JOIN books b "
        "ON b.id = l.book_id WHERE b.genre = {genre} AND strftime('%Y', l.loan_date) = {year} "
        "GROUP BY b.id), ranked AS (SELECT id, n, RANK() OVER (ORDER BY n DESC) AS place "
        "FROM counts) SELECT id, n, place FROM ranked WHERE place <= 5 ORDER BY place, id",
        {"genre": "SELECT genre FROM books", "year": _YEAR},
    ),
    "monthly_loans_running": Intent(
        5,
        (
            "For each month of {year} (YYYY-MM), the number of loans of {genre} books and "
            "the running total so far that year, in month order.",
            "Month by month in {year}: loans of {genre} books that month and cumulatively, "
            "ordered by month.",
        ),
        "WITH monthly AS (SELECT strftime('%Y-%m', l.loan_date) AS month, COUNT(*) AS n "
        "FROM loans l JOIN books b ON b.id = l.book_id WHERE b.genre = {genre} "
        "AND strftime('%Y', l.loan_date) = {year} GROUP BY month) "
        "SELECT month, n, SUM(n) OVER (ORDER BY month) FROM monthly ORDER BY month",
        {"year": _YEAR, "genre": "SELECT genre FROM books"},
    ),
    "member_loan_gaps": Intent(
        5,
        (
            "For member {member_id}, list each loan's id and date with the date of their "
            "previous loan (NULL for the first), in date order, ties by loan id.",
            "Loans of member {member_id} chronologically (then by id): loan id, loan date, "
            "previous loan date (NULL at first).",
        ),
        "SELECT id, loan_date, LAG(loan_date) OVER (ORDER BY loan_date, id) FROM loans "
        "WHERE member_id = {member_id} ORDER BY loan_date, id",
        {"member_id": "SELECT member_id FROM loans GROUP BY member_id HAVING COUNT(*) >= 2"},
    ),
}
