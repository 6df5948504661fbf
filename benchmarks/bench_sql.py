"""Speed of the SQL family: resets, oracle episodes, and ``execution_match`` checks.

* reset: ms per ``reset`` of ``sql:Mixed-v0`` on seeds never seen (each builds its
  database) and on the same seeds again (cached, as when a GRPO group replays a seed);
* ``sql:Mixed-v0`` (reset, the gold query as the answer) and ``sql:Mixed-Tools-v0`` (list
  tables, run the gold query, answer) driven by their oracle, on a pinned database
  (``db_seed=0``) and with a database per seed;
* ``execution_match(gold, gold, db)`` over questions of every domain and level on SQLite and
  on DuckDB (the answer in DuckDB's dialect), each check after ``database_path()`` as the
  env issues it: checks/s of wall time, and checks per CPU second of this process and the
  query workers together (steadier on a loaded machine). ``--group G`` checks each
  question G times in a row, as a GRPO group does; ``--answers same distinct`` times both
  a group that repeats one answer (the repeats come from the result cache) and one whose
  answers all differ in text (every check runs its query); ``--threads 1 8`` checks one at
  a time and on 8 threads at once (a runner steps envs on threads); ``--duckdb-workers N``
  sizes the DuckDB pool.

    python benchmarks/bench_sql.py --episodes 300 --checks 300

``--save-pairs FILE`` writes the question pairs; ``--pairs FILE`` checks those instead, so
two versions of palaestra can be timed on the same queries. ``--suites K:F ...`` (or
``--suite-sizes K ...`` for ``K:0``) also times checks graded on K databases of other seeds
and F fuzzed copies of the episode's database (:mod:`palaestra.envs.sql.suite`, built inside
the timing), and measures what each suite catches: near misses made from generated golds
(DISTINCT added or dropped, a bound made strict or loose, a year or month bound that skips a
day, an integer bound off by one) that score 1 on the episode's database, how many some
database of 16 other seeds and 4 fuzzed copies tells apart, how many each suite scores 0,
and how many equivalent rewrites (made from the golds, and the labelled pairs of the tests)
it wrongly scores 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import json
import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import sqlglot

import palaestra
from palaestra.envs.sql.databases import DOMAINS, cache_dir, database_path, suite_paths
from palaestra.envs.sql.questions import generate_question
from palaestra.envs.sql.suite import fuzzed_paths, grading_suite
from palaestra.verifiers.sql import connect_readonly, execution_match
from palaestra.verifiers.sql_compare import has_limit
from palaestra.verifiers.sql_results import results


def labelled_rewrites() -> list[tuple[str, str, str]]:
    """(domain, gold, rewrite) of the labelled equivalent pairs the tests hold."""
    path = Path(__file__).parents[1] / "tests" / "verifiers" / "test_sql_labelled_pairs.py"
    spec = importlib.util.spec_from_file_location("labelled_pairs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SAME_PAIRS


def worker_cpu() -> float:
    """CPU seconds used so far by the SQLite and DuckDB worker processes (0 where none)."""
    pids = []
    for module in ("palaestra.verifiers.sql", "palaestra.verifiers.sql_duckdb"):
        try:
            pids += importlib.import_module(module).default_pool().pids
        except (ImportError, AttributeError):  # a version that ran queries in this process
            continue
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def reset_ms(seeds: range) -> tuple[float, float]:
    """ms per reset of sql:Mixed-v0 on new ``seeds`` (an empty database cache), then on the
    same seeds again."""
    env = palaestra.make("sql:Mixed-v0")
    saved = os.environ.get("PALAESTRA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PALAESTRA_CACHE_DIR"] = cache
        env.reset(seed=seeds[0])
        times = []
        for _ in range(2):
            started = time.perf_counter()
            for seed in seeds[1:]:
                env.reset(seed=seed)
            times.append((time.perf_counter() - started) / (len(seeds) - 1) * 1000)
        env.close()
    if saved is None:
        del os.environ["PALAESTRA_CACHE_DIR"]
    else:
        os.environ["PALAESTRA_CACHE_DIR"] = saved
    return times[0], times[1]


def oracle_rate(env_id: str, episodes: int, **kwargs: object) -> tuple[float, float]:
    """(steps/s, episodes/s) of ``env_id`` played by its oracle over ``episodes`` seeds
    (their databases built before timing)."""
    env = palaestra.make(env_id, **kwargs)
    for seed in range(episodes):
        env.reset(seed=seed)
    steps = 0
    started = time.perf_counter()
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        policy = env.oracle()
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(policy(observation))
            steps += 1
            done = terminated or truncated
    elapsed = time.perf_counter() - started
    env.close()
    return steps / elapsed, episodes / elapsed


def question_pairs(checks: int, levels: tuple[int, ...]) -> list[tuple[str, str]]:
    """(gold SQL, SQLite path) of ``checks`` questions at ``levels`` over every domain."""
    pairs = []
    rng = np.random.default_rng(0)
    domains = sorted(DOMAINS)
    connections = {d: connect_readonly(database_path(d)) for d in domains}
    for index in range(checks):
        domain = domains[index % len(domains)]
        question = generate_question(domain, connections[domain], rng, levels=levels)
        pairs.append((question.gold_sql, str(database_path(domain))))
    return pairs


def env_path(path: str) -> Path:
    """The database at ``path`` asked for as the env asks for it on each reset
    (:func:`database_path`, which marks the file used)."""
    domain, seed = re.fullmatch(r"(\w+)-seed(\d+)-v\d+\.sqlite", Path(path).name).groups()
    return database_path(domain, int(seed), Path(path).parent)


def match_rate(
    pairs: list[tuple[str, str]],
    backend: str = "sqlite",
    seeds: int = 0,
    fuzzed: int = 0,
    distinct: bool = False,
    threads: int = 1,
) -> tuple[float, float]:
    """(checks/s, checks per CPU second) of ``execution_match(gold, gold)`` over ``pairs``,
    the predicted query on ``backend`` (DuckDB gets it in its dialect), graded on ``seeds``
    databases of other seeds and ``fuzzed`` fuzzed copies of the episode's database (built
    on a question's first check, inside the timing, as the env does). A query asked again
    is answered from the result cache, as in the env; ``distinct``: no answer's text is
    asked twice (each check plans and runs its query). ``threads``: checks run on this many
    threads at once, as a runner steps envs (a group's checks side by side)."""
    answers = [sqlglot.transpile(gold, read="sqlite", write=backend)[0] for gold, _ in pairs]
    if distinct:  # a comment makes each answer of a run of one question a new text
        answers = [f"{answer} /* {i} */" for i, answer in enumerate(answers)]
    domain_of = lambda path: Path(path).name.split("-seed")[0]  # noqa: E731
    for answer, (gold, path) in zip(answers[:10], pairs[:10], strict=True):
        execution_match(answer, gold, path, backend=backend)  # start workers, load databases
    for domain in DOMAINS:
        suite_paths(domain, seeds)  # built before timing, as they are once per run
    for old in (cache_dir() / "fuzzed").glob("*.sqlite"):  # each question's built in the timing
        old.unlink(missing_ok=True)
    results.clear()
    cpu, worker, started = time.process_time(), worker_cpu(), time.perf_counter()

    def check(index: int) -> float:
        (gold, path), episode = pairs[index], env_path(pairs[index][1])
        suite = grading_suite(domain_of(path), episode, gold, seeds=seeds, fuzzed=fuzzed)
        return execution_match(answers[index], gold, episode, backend=backend, suite=suite)

    with ThreadPoolExecutor(threads) as pool:
        matched = sum(pool.map(check, range(len(pairs))))
    elapsed = time.perf_counter() - started
    used = time.process_time() - cpu + worker_cpu() - worker
    assert matched == len(pairs), f"{len(pairs) - matched} gold queries did not match themselves"
    return len(pairs) / elapsed, len(pairs) / used


MUTATIONS = [
    ("SELECT DISTINCT ", "SELECT "),
    ("SELECT ", "SELECT DISTINCT "),
    (" >= ", " > "),
    (" <= ", " < "),
    (" > ", " >= "),
    (" < ", " <= "),
]
"""One-edit near misses: DISTINCT added or dropped, a bound made strict or loose."""
_YEAR = re.compile(r"strftime\('%Y', ([\w.]+)\) = '(\d{4})'")
_MONTH = re.compile(r"strftime\('%Y-%m', ([\w.]+)\) = '(\d{4})-(\d{2})'")
_INTEGER_BOUND = re.compile(r"([\w.]+) (>=|<=|>|<) (\d+)\b")
POOL_SEEDS = range(100, 116)
"""Seeds of the databases that, with :data:`POOL_FUZZED` fuzzed copies, decide whether a
near miss can be told apart at all."""
POOL_FUZZED = 4


def column_kinds(path: Path) -> dict[str, str]:
    """Column name -> declared type over the tables of the database at ``path``."""
    connection = connect_readonly(path)
    kinds = {}
    for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for row in connection.execute(f"PRAGMA table_info({table})"):
            kinds[row[1]] = row[2].upper()
    connection.close()
    return kinds


def edits(gold: str, kinds: dict[str, str]) -> list[tuple[str, str]]:
    """(kind, edited gold): near misses (one edit of :data:`MUTATIONS`; a year or month
    bound that skips its first or last day; an integer bound off by one), and rewrites
    equivalent on every database the generators make (a year as BETWEEN on a DATE column,
    ``x > n`` as ``x >= n + 1`` on an INTEGER column, ``x >= n`` as ``NOT x < n``)."""
    found = [("miss", gold.replace(old, new, 1)) for old, new in MUTATIONS if old in gold]
    if match := _YEAR.search(gold):
        column, year = match.groups()
        span = match.span()
        for bounds in (
            f"> '{year}-01-01' AND {column} <= '{year}-12-31'",
            f">= '{year}-01-01' AND {column} < '{year}-12-31'",
        ):
            found.append(("miss", gold[: span[0]] + f"{column} {bounds}" + gold[span[1] :]))
        between = f"{column} BETWEEN '{year}-01-01' AND '{year}-12-31'"
        label = "same" if kinds.get(column.split(".")[-1]) == "DATE" else "miss"
        found.append((label, gold[: span[0]] + between + gold[span[1] :]))
    if match := _MONTH.search(gold):
        column, year, month = match.groups()
        bounds = f"{column} > '{year}-{month}-01' AND {column} < '{year}-{month}-32'"
        found.append(("miss", gold[: match.start()] + bounds + gold[match.end() :]))
    if match := _INTEGER_BOUND.search(gold):
        column, operator, number = match.groups()
        if kinds.get(column.split(".")[-1]) == "INTEGER":
            shifted = f"{column} {operator} {int(number) + 1}"
            found.append(("miss", gold[: match.start()] + shifted + gold[match.end() :]))
            flip = {">": (">=", 1), ">=": (">", -1), "<": ("<=", -1), "<=": ("<", 1)}
            other, step = flip[operator]
            same = f"{column} {other} {int(number) + step}"
            found.append(("same", gold[: match.start()] + same + gold[match.end() :]))
            negated = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}[operator]
            found.append(
                (
                    "same",
                    gold[: match.start()]
                    + f"NOT {column} {negated} {number}"
                    + gold[match.end() :],
                )
            )
    return found


def near_misses(questions: int, episode_seeds: range) -> list[tuple[str, str, str, Path, str]]:
    """(domain, gold, edited gold, episode database, "miss" or "same") for the edits of
    :func:`edits` that score 1 on the episode's own database (golds with LIMIT left out:
    they are judged on the episode's database only)."""
    found = []
    rng = np.random.default_rng(1)
    domains = sorted(DOMAINS)
    for index in range(questions):
        domain = domains[index % len(domains)]
        path = database_path(domain, episode_seeds[index % len(episode_seeds)])
        question = generate_question(domain, connect_readonly(path), rng)
        if has_limit(question.gold_sql):
            continue
        for label, edited in edits(question.gold_sql, column_kinds(path)):
            if execution_match(edited, question.gold_sql, path) == 1.0:
                found.append((domain, question.gold_sql, edited, path, label))
    return found


def suite_catch(questions: int, configs: list[tuple[int, int]]) -> None:
    """Print, per (seeds, fuzzed) suite, the near misses it scores 0 and the equivalent
    rewrites it wrongly scores 0. Any database where an edit and its gold differ proves
    them different, so every 0 on a miss is a true catch."""
    found = near_misses(questions, range(0, 40))
    misses = [(d, g, m, p) for d, g, m, p, label in found if label == "miss"]
    rewrites = [(d, g, m, p) for d, g, m, p, label in found if label == "same"]
    labelled = [
        (d, g, m, database_path(d, seed)) for d, g, m in labelled_rewrites() for seed in (0, 1)
    ]
    rewrites += [(d, g, m, p) for d, g, m, p in labelled if not has_limit(g)]
    pool = lambda d, g, p: [  # noqa: E731
        *(database_path(d, s) for s in POOL_SEEDS),
        *fuzzed_paths(p, g, POOL_FUZZED),
    ]
    told = [any(execution_match(m, g, q) == 0.0 for q in pool(d, g, p)) for d, g, m, p in misses]
    print(
        f"\n{len(misses)} near misses right on their episode's database; {sum(told)} told "
        f"apart by some database of {len(POOL_SEEDS)} other seeds and {POOL_FUZZED} fuzzed "
        f"copies; {len(rewrites)} equivalent rewrites ({len(rewrites) - len(labelled)} made "
        "from the golds, the rest labelled pairs on seeds 0 and 1)\n"
    )
    print(
        "| seeds | fuzzed | misses told apart, scored 0 | misses scored 0 in all | "
        "rewrites wrongly scored 0 |\n| ---: | ---: | ---: | ---: | ---: |"
    )
    for seeds, fuzzed in configs:

        def scores(edits: list, seeds: int = seeds, fuzzed: int = fuzzed) -> list[float]:
            return [
                execution_match(m, g, p, suite=grading_suite(d, p, g, seeds=seeds, fuzzed=fuzzed))
                for d, g, m, p in edits
            ]

        caught = [score == 0.0 for score in scores(misses)]
        hit = sum(c for c, t in zip(caught, told, strict=True) if t)
        wrong = sum(score == 0.0 for score in scores(rewrites))
        print(f"| {seeds} | {fuzzed} | {hit}/{sum(told)} | {sum(caught)}/{len(misses)} | {wrong} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "duckdb"])
    parser.add_argument("--pairs", help="JSON file of [gold, path] pairs to check instead")
    parser.add_argument("--save-pairs", help="write this version's question pairs here")
    parser.add_argument("--checks-only", action="store_true")
    parser.add_argument(
        "--suite-sizes",
        nargs="*",
        type=int,
        default=[],
        help="K: grade on K databases of other seeds (same as --suites K:0)",
    )
    parser.add_argument(
        "--suites",
        nargs="*",
        default=[],
        help="K:F: K databases of other seeds and F fuzzed copies",
    )
    parser.add_argument("--near-miss-questions", type=int, default=300)
    parser.add_argument("--group", type=int, default=1, help="check each pair this many times")
    parser.add_argument(
        "--duckdb-workers", type=int, help="the DuckDB pool's size (default: one per core, up to 4)"
    )
    parser.add_argument(
        "--threads",
        nargs="*",
        type=int,
        default=[1],
        help="check on this many threads at once (as a runner steps envs on threads)",
    )
    parser.add_argument(
        "--answers",
        nargs="*",
        choices=("same", "distinct"),
        default=["same"],
        help="a group's answers: the same text (a repeat is answered from the result cache), "
        "or texts that differ (each check runs its query)",
    )
    args = parser.parse_args()
    if args.duckdb_workers:
        import palaestra.verifiers.sql_duckdb as duckdb_backend

        duckdb_backend.default_pool.replace(duckdb_backend.new_pool(args.duckdb_workers))
    for domain in DOMAINS:
        database_path(domain)  # built before timing
    print(f"load: {os.getloadavg()[0]:.2f}\n\n| measure | rate |\n| --- | ---: |")
    if not args.checks_only:
        fresh, again = reset_ms(range(500_000, 500_000 + args.episodes // 3))
        print(f"| sql:Mixed-v0 reset, new seed / same seed again | {fresh:.1f} / {again:.1f} ms |")
        for env_id in ("sql:Mixed-v0", "sql:Mixed-Tools-v0"):
            for label, kwargs in [("db_seed=0", {"db_seed": 0}), ("default", {})]:
                steps, episodes = oracle_rate(env_id, args.episodes, **kwargs)
                rate = f"{steps:,.0f} steps/s ({episodes:,.0f} ep/s)"
                print(f"| {env_id} ({label}) oracle | {rate} |")
    suites = {"all levels": question_pairs(args.checks, (1, 2, 3, 4, 5))}
    suites["levels 1-2"] = question_pairs(args.checks, (1, 2))
    if args.group > 1:  # each question answered G times in a row, as a GRPO group is
        suites = {
            f"{name}, groups of {args.group}": [pair for pair in pairs for _ in range(args.group)]
            for name, pairs in suites.items()
        }
    if args.save_pairs:
        Path(args.save_pairs).write_text(json.dumps(suites))
    if args.pairs:
        suites = {
            f"{name} (given)": pairs
            for name, pairs in json.loads(Path(args.pairs).read_text()).items()
        }
    configs = [(k, 0) for k in args.suite_sizes]
    configs += [tuple(map(int, text.split(":"))) for text in args.suites]
    for name, pairs in suites.items():
        for backend in args.backends:
            runs = itertools.product(configs or [(0, 0)], args.answers, args.threads)
            for (seeds, fuzzed), answers, threads in runs:
                distinct = answers == "distinct"
                wall, cpu = match_rate(pairs, backend, seeds, fuzzed, distinct, threads)
                print(
                    f"| execution_match on {backend}, {name}, {answers} answers, "
                    f"{threads} thread{'s' * (threads > 1)}, seeds={seeds} fuzzed={fuzzed} | "
                    f"{wall:,.0f} checks/s, {cpu:,.0f} per CPU s |"
                )
    if configs and args.near_miss_questions:
        suite_catch(args.near_miss_questions, configs)


if __name__ == "__main__":
    main()
