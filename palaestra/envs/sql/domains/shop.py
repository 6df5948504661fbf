"""Shop: customers (some referred by another), products, orders and their lines."""

from __future__ import annotations

import datetime as dt
import sqlite3

from palaestra.envs.sql.domains.base import CITIES, Gen, Intent, insert

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT,
    city TEXT NOT NULL, joined DATE NOT NULL, referred_by INTEGER REFERENCES customers(id));
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    category TEXT NOT NULL, price REAL NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    order_date DATE NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL, unit_price REAL NOT NULL, PRIMARY KEY (order_id, product_id));
"""
CATEGORIES = ("books", "garden", "kitchen", "toys", "electronics", "sports")
ADJECTIVES = ("Classic", "Deluxe", "Compact", "Eco", "Pro", "Mini", "Smart", "Rustic")
NOUNS = ("Lamp", "Kettle", "Puzzle", "Racket", "Novel", "Shovel", "Speaker", "Mug", "Drone")
STATUSES = ("delivered", "shipped", "processing", "cancelled", "returned")


def build(c: sqlite3.Connection, g: Gen) -> None:
    c.executescript(SCHEMA)
    n = g.size(300)
    ids = list(range(1, n + 1))
    names = g.names(n)
    emails = [
        f"{name.split()[0].lower()}.{i}@example.com" for i, name in zip(ids, names, strict=True)
    ]
    referrers = [
        max(1, int(i * u)) if i > 1 else None for i, u in zip(ids, g.rng.random(n), strict=True)
    ]
    insert(c, "customers", [
        ids, names, g.nulls(emails, 0.15), g.skewed(g.shuffled(CITIES), n, 1.1),
        g.dates(dt.date(2019, 1, 1), 1500, n), g.nulls(referrers, 0.8),
    ])  # fmt: skip
    m = g.size(80)
    products = list(range(1, m + 1))
    titles = [
        f"{a} {b} {i}"
        for a, b, i in zip(g.choice(ADJECTIVES, m), g.choice(NOUNS, m), products, strict=True)
    ]
    prices = g.money(3, 400, m)
    insert(c, "products", [products, titles, g.skewed(g.shuffled(CATEGORIES), m, 1.3), prices])
    k = g.size(2000)
    orders = list(range(1, k + 1))
    insert(c, "orders", [
        orders, g.skewed(g.shuffled(ids), k, 1.05), g.dates(dt.date(2021, 1, 1), 1000, k),
        g.skewed(STATUSES, k, 1.6),
    ])  # fmt: skip
    lines = [
        (o, p)
        for o, chosen in zip(orders, g.subsets(products, g.ints(1, 4, k)), strict=True)
        for p in chosen
    ]
    insert(c, "order_items", [
        [o for o, _ in lines], [p for _, p in lines], g.skewed(range(1, 6), len(lines), 1.5),
        [prices[p - 1] for _, p in lines],
    ])  # fmt: skip


_YEAR = "SELECT DISTINCT strftime('%Y', order_date) FROM orders"
_REVENUE = "SUM(i.quantity * i.unit_price)"
_LINES = "order_items i JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id"

INTENTS = {
    "customers_in_city": Intent(
        1,
        (
            "List the names of the customers who live in {city}, one row per customer.",
            "Which customers are based in {city}? Give their names, one row per customer "
            "(two customers may share a name).",
        ),
        "SELECT name FROM customers WHERE city = {city}",
        {"city": "SELECT city FROM customers"},
    ),
    "products_in_price_band": Intent(
        1,
        (
            "Which {category} products cost between {low} and {high}, both included? "
            "Give their names.",
            "Names of the products in the {category} category priced from {low} to {high}.",
        ),
        "SELECT name FROM products WHERE category = {category} AND price BETWEEN {low} AND {high}",
        {
            "category": "SELECT category FROM products",
            "low": "SELECT price FROM products WHERE category = {category}",
            "high": "SELECT price FROM products WHERE category = {category} AND price >= {low}",
        },
    ),
    "customers_by_name_start": Intent(
        1,
        (
            "Give the id and name of every customer whose name starts with {prefix}.",
            "Which customers have a name beginning with the letters {prefix}? Ids and names.",
        ),
        "SELECT id, name FROM customers WHERE name LIKE {prefix} || '%'",
        {"prefix": "SELECT substr(name, 1, 2) FROM customers"},
    ),
    "orders_in_status_between": Intent(
        1,
        (
            "Which orders with status {status} were placed from {start} to {end}, both days "
            "included? Give their ids.",
            "Ids of the {status} orders whose order date lies between {start} and {end} "
            "(inclusive).",
        ),
        "SELECT id FROM orders WHERE status = {status} AND order_date BETWEEN {start} AND {end}",
        {
            "status": "SELECT status FROM orders",
            "start": "SELECT order_date FROM orders WHERE status = {status}",
            "end": "SELECT order_date FROM orders WHERE status = {status} "
            "AND order_date >= {start}",
        },
    ),
    "price_labels": Intent(
        1,
        (
            "For each {category} product, give its name and the label 'budget' if it costs "
            "less than {limit}, or 'premium' otherwise.",
            "Label the {category} products: name, then 'budget' when the price is under "
            "{limit} and 'premium' when it is {limit} or more.",
        ),
        "SELECT name, CASE WHEN price < {limit} THEN 'budget' ELSE 'premium' END "
        "FROM products WHERE category = {category}",
        {
            "category": "SELECT category FROM products",
            "limit": "SELECT CAST(price AS INTEGER) FROM products WHERE category = {category}",
        },
    ),
    "products_of_customer": Intent(
        2,
        (
            "Which products has {name} ordered? Give each product name once.",
            "Give the distinct names of the products that customer {name} bought.",
        ),
        "SELECT DISTINCT p.name FROM customers c JOIN orders o ON o.customer_id = c.id "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
        "WHERE c.name = {name}",
        {
            "name": "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            "JOIN order_items i ON i.order_id = o.id GROUP BY c.name "
            "HAVING COUNT(DISTINCT c.id) = 1 AND COUNT(DISTINCT i.product_id) <= 20"
        },
    ),
    "city_orders_in_month": Intent(
        2,
        (
            "List the ids of the orders placed in {month} (year-month) by customers who live "
            "in {city}.",
            "Which orders did customers from {city} place during {month}? Order ids.",
        ),
        "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
        "WHERE c.city = {city} AND strftime('%Y-%m', o.order_date) = {month}",
        {
            "city": "SELECT city FROM customers",
            "month": "SELECT strftime('%Y-%m', o.order_date) FROM orders o "
            "JOIN customers c ON c.id = o.customer_id WHERE c.city = {city}",
        },
    ),
    "referrals_in_city": Intent(
        2,
        (
            "Which customers living in {city} were referred by another customer? For each "
            "of them give their name and the referrer's name, one row per referred customer.",
            "For every customer from {city} who has a referrer: the customer's name and the "
            "name of the customer who referred them (one row per referred customer).",
        ),
        "SELECT c.name, r.name FROM customers c JOIN customers r ON r.id = c.referred_by "
        "WHERE c.city = {city}",
        {"city": "SELECT city FROM customers WHERE referred_by IS NOT NULL"},
    ),
    "large_lines_in_category": Intent(
        2,
        (
            "List order id, product name and quantity of every order line for a "
            "{category} product with a quantity of at least {quantity}.",
            "Order lines of {category} products where at least {quantity} units were "
            "bought: order id, product name, quantity.",
        ),
        "SELECT i.order_id, p.name, i.quantity FROM order_items i "
        "JOIN products p ON p.id = i.product_id "
        "WHERE p.category = {category} AND i.quantity >= {quantity}",
        {
            "category": "SELECT category FROM products",
            "quantity": "SELECT i.quantity FROM order_items i JOIN products p "
            "ON p.id = i.product_id WHERE p.category = {category}",
        },
    ),
    "revenue_by_category": Intent(
        3,
        (
            "For orders with status {status} placed in {year}, what is the total revenue "
            "(quantity times unit price) per product category? Give category and total.",
            "Per product category: the sum of quantity times unit price over the lines of "
            "{status} orders from {year}.",
        ),
        f"SELECT p.category, {_REVENUE} FROM {_LINES} "
        "WHERE o.status = {status} AND strftime('%Y', o.order_date) = {year} "
        "GROUP BY p.category",
        {"status": "SELECT status FROM orders", "year": _YEAR},
    ),
    "frequent_customers": Intent(
        3,
        (
            "Which customers placed more than {n} orders? Give customer id and their number "
            "of orders.",
            "Customers with over {n} orders: id and order count.",
        ),
        "SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id HAVING COUNT(*) > {n}",
        {"n": "SELECT COUNT(*) - 1 FROM orders GROUP BY customer_id"},
    ),
    "status_split_by_city": Intent(
        3,
        (
            "For each city where customers placed orders, how many of those orders have "
            "status {status} and how many have another status? City and the two counts.",
            "Per customer city (cities with orders): the number of {status} orders, then "
            "the number of orders in every other status.",
        ),
        "SELECT c.city, SUM(CASE WHEN o.status = {status} THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN o.status <> {status} THEN 1 ELSE 0 END) FROM orders o "
        "JOIN customers c ON c.id = o.customer_id GROUP BY c.city",
        {"status": "SELECT status FROM orders"},
    ),
    "average_quantity_by_category": Intent(
        3,
        (
            "What is the average quantity of an order line per product category, over "
            "orders placed in {year} by customers from {city}? Category and average.",
            "Mean units per order line, for each product category, counting only orders "
            "from {year} by customers living in {city}.",
        ),
        f"SELECT p.category, AVG(i.quantity) FROM {_LINES} "
        "JOIN customers c ON c.id = o.customer_id "
        "WHERE strftime('%Y', o.order_date) = {year} AND c.city = {city} GROUP BY p.category",
        {"year": _YEAR, "city": "SELECT city FROM customers"},
    ),
    "idle_customers_in_year": Intent(
        4,
        (
            "Which customers living in {city} placed no order in {year}? Give their ids.",
            "Ids of the customers from {city} without a single order dated {year}.",
        ),
        "SELECT id FROM customers WHERE city = {city} EXCEPT "
        "SELECT customer_id FROM orders WHERE strftime('%Y', order_date) = {year}",
        {"city": "SELECT city FROM customers", "year": _YEAR},
    ),
    "bought_both_categories": Intent(
        4,
        (
            "Which customers bought at least one {first} product and at least one {second} "
            "product? Give their ids.",
            "Ids of the customers who have ordered from both the {first} and the {second} "
            "categories.",
        ),
        f"SELECT o.customer_id FROM {_LINES} WHERE p.category = {{first}} INTERSECT "
        f"SELECT o.customer_id FROM {_LINES} WHERE p.category = {{second}}",
        {
            "first": "SELECT category FROM products",
            "second": "SELECT category FROM products WHERE category <> {first}",
        },
    ),
    "pricier_than_their_category": Intent(
        4,
        (
            "Which products cost more than the average price of their own category and "
            "were ordered at least once by a customer from {city}? Give product names.",
            "Names of the products priced above their category's mean price that some "
            "customer living in {city} has bought.",
        ),
        "SELECT p.name FROM products p WHERE p.price > "
        "(SELECT AVG(q.price) FROM products q WHERE q.category = p.category) "
        "AND p.id IN (SELECT i.product_id FROM order_items i JOIN orders o "
        "ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id WHERE c.city = {city})",
        {"city": "SELECT city FROM customers"},
    ),
    "big_spenders_in_city": Intent(
        4,
        (
            "Which customers from {city} spent more in total than the average customer from "
            "{city} who ordered? Spending is quantity times unit price over all their orders. "
            "Give customer ids.",
            "Among customers living in {city} who placed orders, which ones have a total "
            "spend (quantity times unit price) above the average total of that group? Ids.",
        ),
        f"SELECT o.customer_id FROM {_LINES} JOIN customers c ON c.id = o.customer_id "
        f"WHERE c.city = {{city}} GROUP BY o.customer_id HAVING {_REVENUE} > "
        f"(SELECT AVG(total) FROM (SELECT {_REVENUE} AS total FROM {_LINES} "
        "JOIN customers c ON c.id = o.customer_id WHERE c.city = {city} "
        "GROUP BY o.customer_id) AS totals)",
        {"city": "SELECT city FROM customers"},
    ),
    "best_seller_per_category": Intent(
        5,
        (
            "For each product category, which product brought the most revenue (quantity "
            "times unit price) in {status} orders placed in {year}? Give category, product "
            "name and that revenue, ordered by category; list every product that ties.",
            "Top product by revenue in each category, over {status} orders of {year}: "
            "category, product name, revenue, sorted by category (all of them if several "
            "tie).",
        ),
        f"WITH revenue AS (SELECT p.category, p.name, {_REVENUE} AS total FROM {_LINES} "
        "WHERE o.status = {status} AND strftime('%Y', o.order_date) = {year} "
        "GROUP BY p.id, p.category, p.name), ranked AS (SELECT category, name, total, "
        "RANK() OVER (PARTITION BY category ORDER BY total DESC) AS place FROM revenue) "
        "SELECT category, name, total FROM ranked WHERE place = 1 ORDER BY category",
        {"status": "SELECT status FROM orders", "year": _YEAR},
    ),
    "monthly_orders_running": Intent(
        5,
        (
            "For each month of {year} (as YYYY-MM) in which customers from {city} ordered, "
            "give the number of their orders and the running total of those orders so far "
            "that year, in month order.",
            "Month by month in {year}, orders placed by customers living in {city}: month "
            "(YYYY-MM), orders that month, cumulative orders, ordered by month.",
        ),
        "WITH monthly AS (SELECT strftime('%Y-%m', o.order_date) AS month, COUNT(*) AS n "
        "FROM orders o JOIN customers c ON c.id = o.customer_id "
        "WHERE strftime('%Y', o.order_date) = {year} AND c.city = {city} GROUP BY month) "
        "SELECT month, n, SUM(n) OVER (ORDER BY month) FROM monthly ORDER BY month",
        {"year": _YEAR, "city": "SELECT city FROM customers"},
    ),
    "previous_order_of_customer": Intent(
        5,
        (
            "For customer {customer_id}, list each of their orders (id and date) with the "
            "date of their previous order (NULL for the first), by date and then order id.",
            "Orders of customer {customer_id} in date order (ties by id): order id, order "
            "date and the date of the order before it (NULL for the first one).",
        ),
        "SELECT id, order_date, LAG(order_date) OVER (ORDER BY order_date, id) FROM orders "
        "WHERE customer_id = {customer_id} ORDER BY order_date, id",
        {"customer_id": "SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) >= 2"},
    ),
    "order_count_ranks_in_city": Intent(
        5,
        (
            "Rank the customers living in {city} by their number of orders, most first; "
            "equal counts share a rank and ranks leave no gaps. Give customer id, order count "
            "and rank for ranks 1 to {k}, ordered by rank and then customer id.",
            "Customers from {city} ordered by how many orders they placed (dense ranking, "
            "highest count = 1): id, count, rank, for ranks up to {k}, by rank then id.",
        ),
        "WITH counts AS (SELECT o.customer_id, COUNT(*) AS n FROM orders o "
        "JOIN customers c ON c.id = o.customer_id WHERE c.city = {city} "
        "GROUP BY o.customer_id), ranked AS (SELECT customer_id, n, "
        "DENSE_RANK() OVER (ORDER BY n DESC) AS place FROM counts) "
        "SELECT customer_id, n, place FROM ranked WHERE place <= {k} ORDER BY place, customer_id",
        {"city": "SELECT city FROM customers", "k": "SELECT 2 UNION SELECT 3 UNION SELECT 5"},
    ),
}
