"""Flights: airports, airlines, flights between them, passengers and their bookings."""

from __future__ import annotations

import datetime as dt
import sqlite3

from palaestra.envs.sql.domains.base import Gen, Intent, insert

SCHEMA = """
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
"""
AIRPORTS = (
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
AIRLINES = (
    (1, "Aer Lingus", "Ireland"),
    (2, "TAP Air Portugal", "Portugal"),
    (3, "LOT", "Poland"),
    (4, "Swiss", "Switzerland"),
    (5, "Kenya Airways", "Kenya"),
    (6, "Icelandair", "Iceland"),
    (7, "Air Canada", "Canada"),
    (8, "Peach", "Japan"),
)
CLASSES = ("economy", "premium", "business", "first")
FARE_FACTOR = {"economy": 1.0, "premium": 1.6, "business": 3.2, "first": 6.5}


def build(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript(SCHEMA)
    insert(c, "airports", list(zip(*AIRPORTS, strict=True)))
    insert(c, "airlines", list(zip(*AIRLINES, strict=True)))
    codes = g.shuffled([airport[0] for airport in AIRPORTS])
    n = g.size(1500)
    flights = list(range(1, n + 1))
    origins = g.skewed(codes, n, 1.2)
    hops = g.ints(1, len(codes) - 1, n)
    destinations = [
        codes[(codes.index(o) + h) % len(codes)] for o, h in zip(origins, hops, strict=True)
    ]
    times = [f"{day} {h:02d}:{m:02d}:00" for day, h, m in zip(
        g.dates(dt.date(2024, 1, 1), 365, n), g.ints(5, 22, n), g.choice((0, 15, 30, 45), n), strict=True
    )]  # fmt: skip
    prices = g.money(40, 1400, n)
    insert(c, "flights", [
        flights, g.skewed(g.shuffled(range(1, len(AIRLINES) + 1)), n, 1.3), origins,
        destinations, times, g.ints(55, 780, n),
        g.nulls([5 * k for k in g.skewed(range(48), n, 1.4)], 0.1), prices,
    ])  # fmt: skip
    p = g.size(800)
    passengers = list(range(1, p + 1))
    countries = [airport[3] for airport in AIRPORTS]
    insert(c, "passengers", [
        passengers, g.names(p), g.nulls(g.choice(countries, p), 0.1),
        [int(u < 0.3) for u in g.rng.random(p)],
    ])  # fmt: skip
    b = g.size(4000)
    booked = g.choice(flights, b)
    seats = g.skewed(CLASSES, b, 1.8)
    paid = [round(prices[f - 1] * FARE_FACTOR[s], 2) for f, s in zip(booked, seats, strict=True)]
    insert(
        c,
        "bookings",
        [list(range(1, b + 1)), booked, g.skewed(g.shuffled(passengers), b, 1.02), seats, paid],
    )


_MONTH = "SELECT strftime('%Y-%m', departure) FROM flights"
_AIRLINE = "SELECT al.name FROM airlines al JOIN flights f ON f.airline_id = al.id"

INTENTS = {
    "flights_from_in_month": Intent(
        1,
        (
            "List the ids of the flights departing from {origin} in {month} (year-month).",
            "Which flights leave {origin} during {month}? Flight ids.",
        ),
        "SELECT id FROM flights WHERE origin = {origin} AND strftime('%Y-%m', departure) = {month}",
        {"origin": "SELECT origin FROM flights", "month": _MONTH + " WHERE origin = {origin}"},
    ),
    "long_delays_from": Intent(
        1,
        (
            "Which flights from {origin} were delayed by at least {minutes} minutes? Give "
            "flight id and delay in minutes.",
            "Flights departing {origin} with a delay of {minutes} minutes or more: id, delay.",
        ),
        "SELECT id, delay_min FROM flights WHERE origin = {origin} AND delay_min >= {minutes}",
        {
            "origin": "SELECT origin FROM flights",
            "minutes": "SELECT delay_min FROM flights WHERE origin = {origin} AND delay_min > 0",
        },
    ),
    "unknown_delays": Intent(
        1,
        (
            "Which flights departing from {origin} in {month} (year-month) have an unknown "
            "delay? Give their ids and destinations.",
            "Flights out of {origin} during {month} whose delay is not recorded: id and "
            "destination.",
        ),
        "SELECT id, destination FROM flights WHERE origin = {origin} "
        "AND strftime('%Y-%m', departure) = {month} AND delay_min IS NULL",
        {
            "origin": "SELECT origin FROM flights WHERE delay_min IS NULL",
            "month": "SELECT strftime('%Y-%m', departure) FROM flights "
            "WHERE origin = {origin} AND delay_min IS NULL",
        },
    ),
    "fare_labels": Intent(
        1,
        (
            "For the flights from {origin} to {destination}, give id, price and the label "
            "'cheap' when the price is under {limit}, else 'expensive'.",
            "Flights {origin} to {destination}: id, price, and 'cheap' (price below {limit}) "
            "or 'expensive' (the rest).",
        ),
        "SELECT id, price, CASE WHEN price < {limit} THEN 'cheap' ELSE 'expensive' END "
        "FROM flights WHERE origin = {origin} AND destination = {destination}",
        {
            "origin": "SELECT origin FROM flights",
            "destination": "SELECT destination FROM flights WHERE origin = {origin}",
            "limit": "SELECT 100 UNION SELECT 250 UNION SELECT 500 UNION SELECT 800",
        },
    ),
    "passengers_named": Intent(
        1,
        (
            "Which passengers have '{last}' in their name? Give id, name and nationality "
            "(NULL where unknown).",
            "Id, name and nationality of every passenger whose name contains {last}.",
        ),
        "SELECT id, name, nationality FROM passengers WHERE name LIKE '%' || {last} || '%'",
        {"last": "SELECT substr(name, instr(name, ' ') + 1) FROM passengers"},
    ),
    "airlines_to_city": Intent(
        3,
        (
            "Which airlines fly from {origin} to {city}, and how many such flights does each "
            "have? Airline name and number of flights.",
            "For each airline with flights from {origin} into {city}: its name and how many "
            "of those flights it operates.",
        ),
        "SELECT al.name, COUNT(*) FROM flights f JOIN airlines al ON al.id = f.airline_id "
        "JOIN airports ap ON ap.code = f.destination WHERE f.origin = {origin} "
        "AND ap.city = {city} GROUP BY al.name",
        {
            "origin": "SELECT origin FROM flights",
            "city": "SELECT ap.city FROM flights f JOIN airports ap ON ap.code = f.destination "
            "WHERE f.origin = {origin}",
        },
    ),
    "passengers_on_flight": Intent(
        2,
        (
            "Who is booked on flight {flight_id}? Give passenger names and seat classes, one "
            "row per booking.",
            "Bookings of flight {flight_id}: passenger name and seat class (one row per booking).",
        ),
        "SELECT p.name, b.seat_class FROM bookings b JOIN passengers p "
        "ON p.id = b.passenger_id WHERE b.flight_id = {flight_id}",
        {"flight_id": "SELECT flight_id FROM bookings"},
    ),
    "return_flights": Intent(
        2,
        (
            "Pair each flight from {origin} to {destination} with every later flight of the "
            "same airline back from {destination} to {origin}: outbound id, return id.",
            "Outbound flights {origin} to {destination} and the later same-airline flights "
            "returning to {origin}: give the pairs of ids (outbound, return).",
        ),
        "SELECT f.id, r.id FROM flights f JOIN flights r ON r.origin = f.destination "
        "AND r.destination = f.origin AND r.airline_id = f.airline_id "
        "AND r.departure > f.departure WHERE f.origin = {origin} AND f.destination = {destination}",
        {
            "origin": "SELECT origin FROM flights",
            "destination": "SELECT destination FROM flights WHERE origin = {origin}",
        },
    ),
    "class_bookings_of_passenger": Intent(
        2,
        (
            "List the flight id, origin and destination of every booking {name} made, one "
            "row per booking.",
            "Bookings of passenger {name}: flight id, origin, destination (one row each).",
        ),
        "SELECT f.id, f.origin, f.destination FROM bookings b JOIN passengers p "
        "ON p.id = b.passenger_id JOIN flights f ON f.id = b.flight_id WHERE p.name = {name}",
        {
            "name": "SELECT p.name FROM passengers p JOIN bookings b ON b.passenger_id = p.id "
            "GROUP BY p.name HAVING COUNT(DISTINCT p.id) = 1"
        },
    ),
    "average_price_by_airline": Intent(
        3,
        (
            "What is the average ticket price per airline for flights departing from "
            "{origin}? Give airline name and average price.",
            "Mean flight price for each airline (by name), over its flights out of {origin}.",
        ),
        "SELECT al.name, AVG(f.price) FROM flights f JOIN airlines al ON al.id = f.airline_id "
        "WHERE f.origin = {origin} GROUP BY al.name",
        {"origin": "SELECT origin FROM flights"},
    ),
    "busy_routes_of_airline": Intent(
        3,
        (
            "Which routes (origin, destination) does {airline} fly more than {n} times? Give "
            "origin, destination and the number of flights.",
            "Routes with over {n} flights by {airline}: origin, destination, flight count.",
        ),
        "SELECT f.origin, f.destination, COUNT(*) FROM flights f JOIN airlines al "
        "ON al.id = f.airline_id WHERE al.name = {airline} GROUP BY f.origin, f.destination "
        "HAVING COUNT(*) > {n}",
        {
            "airline": _AIRLINE,
            "n": "SELECT COUNT(*) - 1 FROM flights f JOIN airlines al ON al.id = f.airline_id "
            "WHERE al.name = {airline} GROUP BY f.origin, f.destination",
        },
    ),
    "premium_and_other_revenue": Intent(
        3,
        (
            "For each airline, how much was paid for {seat_class} bookings and how much for "
            "bookings in all other classes, on flights departing in {month} (year-month)? "
            "Airline name, then the two sums (0 when there is none).",
            "Per airline, over flights leaving in {month}: total paid in {seat_class}, then "
            "total paid in the other seat classes (zero if none).",
        ),
        "SELECT al.name, SUM(CASE WHEN b.seat_class = {seat_class} THEN b.paid ELSE 0 END), "
        "SUM(CASE WHEN b.seat_class <> {seat_class} THEN b.paid ELSE 0 END) "
        "FROM bookings b JOIN flights f ON f.id = b.flight_id "
        "JOIN airlines al ON al.id = f.airline_id "
        "WHERE strftime('%Y-%m', f.departure) = {month} GROUP BY al.name",
        {"seat_class": "SELECT seat_class FROM bookings", "month": _MONTH},
    ),
    "delays_by_origin": Intent(
        3,
        (
            "For each origin airport, over flights departing in {month} (year-month): the "
            "number of flights and the average of the known delays. Origin, count, average.",
            "Per departure airport in {month}: how many flights, and their mean recorded "
            "delay in minutes.",
        ),
        "SELECT origin, COUNT(*), AVG(delay_min) FROM flights "
        "WHERE strftime('%Y-%m', departure) = {month} GROUP BY origin",
        {"month": _MONTH},
    ),
    "never_flew_class": Intent(
        4,
        (
            "Which passengers of {nationality} nationality have never booked a {seat_class} "
            "seat? Give their ids.",
            "Ids of the passengers from {nationality} without any {seat_class} booking.",
        ),
        "SELECT id FROM passengers WHERE nationality = {nationality} EXCEPT "
        "SELECT passenger_id FROM bookings WHERE seat_class = {seat_class}",
        {
            "nationality": "SELECT nationality FROM passengers WHERE nationality IS NOT NULL",
            "seat_class": "SELECT seat_class FROM bookings",
        },
    ),
    "flew_both_airlines": Intent(
        4,
        (
            "Which passengers booked flights with both {first} and {second}? Give their ids.",
            "Ids of the passengers holding bookings on {first} flights and on {second} flights.",
        ),
        "SELECT b.passenger_id FROM bookings b JOIN flights f ON f.id = b.flight_id "
        "JOIN airlines al ON al.id = f.airline_id WHERE al.name = {first} INTERSECT "
        "SELECT b.passenger_id FROM bookings b JOIN flights f ON f.id = b.flight_id "
        "JOIN airlines al ON al.id = f.airline_id WHERE al.name = {second}",
        {"first": _AIRLINE, "second": _AIRLINE + " WHERE al.name <> {first}"},
    ),
    "pricier_than_route": Intent(
        4,
        (
            "Which flights from {origin} cost more than the average price of all flights on "
            "the same route (same origin and destination)? Give id and price.",
            "Flights out of {origin} priced above their route's mean price: id, price.",
        ),
        "SELECT f.id, f.price FROM flights f WHERE f.origin = {origin} AND f.price > "
        "(SELECT AVG(g.price) FROM flights g WHERE g.origin = f.origin "
        "AND g.destination = f.destination)",
        {"origin": "SELECT origin FROM flights"},
    ),
    "big_spending_passengers": Intent(
        4,
        (
            "Which passengers of {nationality} nationality paid more in total than the "
            "average total paid by {nationality} passengers who booked? Give their ids.",
            "Among {nationality} passengers with bookings, the ids of those whose total paid "
            "exceeds the group's average total.",
        ),
        "SELECT b.passenger_id FROM bookings b JOIN passengers p ON p.id = b.passenger_id "
        "WHERE p.nationality = {nationality} GROUP BY b.passenger_id HAVING SUM(b.paid) > "
        "(SELECT AVG(total) FROM (SELECT SUM(x.paid) AS total FROM bookings x "
        "JOIN passengers y ON y.id = x.passenger_id WHERE y.nationality = {nationality} "
        "GROUP BY x.passenger_id) AS totals)",
        {"nationality": "SELECT nationality FROM passengers WHERE nationality IS NOT NULL"},
    ),
    "longest_per_origin": Intent(
        5,
        (
            "For each origin airport, the id of its longest flight departing in {month} "
            "(year-month), the lowest id on ties, ordered by origin. Give origin and id.",
            "Per departure airport, which flight leaving in {month} lasts longest (lowest id "
            "if tied)? Origin and flight id, sorted by origin.",
        ),
        "SELECT origin, id FROM (SELECT origin, id, ROW_NUMBER() OVER (PARTITION BY origin "
        "ORDER BY duration_min DESC, id) AS place FROM flights "
        "WHERE strftime('%Y-%m', departure) = {month}) AS ranked WHERE place = 1 ORDER BY origin",
        {"month": _MONTH},
    ),
    "passenger_itinerary": Intent(
        5,
        (
            "For passenger {passenger_id}, list each booked flight's id and departure time "
            "with the departure time of their previous booked flight (NULL for the first), "
            "one row per booking, in departure order, ties by flight id.",
            "Flights booked by passenger {passenger_id}, one row per booking, in order of "
            "departure (then flight id): flight id, departure, previous booking's departure "
            "(NULL at first).",
        ),
        "SELECT f.id, f.departure, LAG(f.departure) OVER (ORDER BY f.departure, f.id) "
        "FROM bookings b JOIN flights f ON f.id = b.flight_id "
        "WHERE b.passenger_id = {passenger_id} ORDER BY f.departure, f.id",
        {
            "passenger_id": "SELECT passenger_id FROM bookings GROUP BY passenger_id "
            "HAVING COUNT(*) >= 2"
        },
    ),
    "monthly_revenue_running": Intent(
        5,
        (
            "For {airline}, per month of departure (YYYY-MM): the total paid for bookings on "
            "its flights that month and the running total since the first month, in month "
            "order.",
            "Month by month (YYYY-MM), bookings revenue of {airline} flights and its "
            "cumulative sum, ordered by month.",
        ),
        "WITH monthly AS (SELECT strftime('%Y-%m', f.departure) AS month, SUM(b.paid) AS paid "
        "FROM bookings b JOIN flights f ON f.id = b.flight_id JOIN airlines al "
        "ON al.id = f.airline_id WHERE al.name = {airline} GROUP BY month) "
        "SELECT month, paid, SUM(paid) OVER (ORDER BY month) FROM monthly ORDER BY month",
        {"airline": _AIRLINE},
    ),
}
