"""palaestra's ``execution_match`` beside Spider's test-suite evaluation (``eval_exec_match``).

Both grade the same (predicted, gold) pairs on the same SQLite files: each pair gets a
folder holding its episode's database and, for ``suite=K``, the K suite databases of its
domain (links to the generated files), since ``eval_exec_match`` grades on every
``*.sqlite`` beside the database it is given. palaestra grades the prediction on SQLite
and on DuckDB (the prediction in DuckDB's dialect, transpiled before timing). Prints
checks/s of wall time, checks per CPU second (this process and palaestra's query workers
together; Spider's runs in this process), and the agreement with Spider per kind of pair:

* ``gold``: the gold as the prediction (questions of every level, as ``bench_sql.py``);
* ``edit``: the gold with one edit of ``bench_sql.MUTATIONS`` (DISTINCT added or dropped,
  a bound made strict or loose), right or wrong as the data decides;
* ``other``: the gold of the next question on the same domain (nearly always wrong).

The test-suite code is not part of palaestra; clone it and name its folder:

    git clone https://github.com/taoyds/test-suite-sql-eval
    python benchmarks/bench_sql_vs_spider.py --test-suite-eval test-suite-sql-eval --suite-sizes 0 2

It runs with ``plug_value=False, keep_distinct=True``; its ``parse`` module (which needs
``sqlparse``) serves only the other settings, so where ``sqlparse`` is missing a stand-in
that refuses to be called takes its place. palaestra's gold results are cached per file
and query (as in the env); Spider runs the gold on every call. palaestra is timed with its
result cache (a prediction asked before on the same file is not run again: an ``other``
pair repeats a gold) and without it.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import sys
import tempfile
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import sqlglot

sys.path.insert(0, str(Path(__file__).parent))
from bench_sql import MUTATIONS, question_pairs, worker_cpu

from palaestra.envs.sql.databases import DOMAINS, database_path, suite_paths
from palaestra.verifiers.sql import execution_match
from palaestra.verifiers.sql_results import results

Pair = tuple[str, str, str, str]
"""(kind, predicted SQL, gold SQL, domain)."""


def spider_eval(directory: str) -> Callable[..., int]:
    """``exec_eval.eval_exec_match`` from a checkout of test-suite-sql-eval."""
    sys.path.insert(0, str(Path(directory).resolve()))
    try:
        importlib.import_module("sqlparse")
    except ModuleNotFoundError:  # parse.py serves plug_value=True / keep_distinct=False only
        stand_in = types.ModuleType("parse")

        def unused(*args: object, **kwargs: object) -> None:
            raise RuntimeError("parse.py needs sqlparse (plug_value / keep_distinct=False)")

        stand_in.get_all_preds_for_execution = stand_in.remove_distinct = unused
        sys.modules["parse"] = stand_in
    return importlib.import_module("exec_eval").eval_exec_match


def make_pairs(questions: int) -> list[tuple[Pair, str]]:
    """The three kinds of pair (module docstring) over ``questions`` questions of every
    level, each with its episode database's path."""
    golds = question_pairs(questions, (1, 2, 3, 4, 5))
    domain_of = lambda path: Path(path).name.split("-seed")[0]  # noqa: E731
    pairs = [(("gold", gold, gold, domain_of(path)), path) for gold, path in golds]
    for gold, path in golds:
        for old, new in MUTATIONS:
            if old in gold:
                pairs.append((("edit", gold.replace(old, new, 1), gold, domain_of(path)), path))
    for index, (gold, path) in enumerate(golds):
        other = golds[(index + len(DOMAINS)) % len(golds)][0]  # the same domain's next question
        pairs.append((("other", other, gold, domain_of(path)), path))
    return pairs


def in_duckdb(sql: str) -> str:
    """``sql`` in DuckDB's dialect; as written when sqlglot cannot parse it (an edit that
    broke the query: both graders score it 0)."""
    try:
        return sqlglot.transpile(sql, read="sqlite", write="duckdb")[0]
    except sqlglot.errors.ParseError:
        return sql


def lay_out(pairs: list[tuple[Pair, str]], size: int, root: Path) -> list[tuple[Path, list[Path]]]:
    """One folder per pair under ``root``: links to its episode database and to ``size``
    suite databases of its domain. Returns (episode path, suite paths) per pair."""
    laid = []
    for index, ((_, _, _, domain), path) in enumerate(pairs):
        folder = root / f"suite{size}" / f"pair{index}"
        folder.mkdir(parents=True)
        files = []
        for target in [Path(path), *suite_paths(domain, size)]:
            (folder / target.name).symlink_to(target)
            files.append(folder / target.name)
        laid.append((files[0], files[1:]))
    return laid


def timed(grade: Callable[[int], float], count: int) -> tuple[list[float], float, float]:
    """(verdicts, checks/s, checks per CPU second) of ``grade(i)`` for i < count, the
    first ten run once untimed (workers start, databases load; palaestra's result cache is
    emptied after them)."""
    for index in range(min(10, count)):
        grade(index)
    results.clear()
    cpu, worker, started = time.process_time(), worker_cpu(), time.perf_counter()
    verdicts = [grade(index) for index in range(count)]
    elapsed = time.perf_counter() - started
    used = time.process_time() - cpu + worker_cpu() - worker
    return verdicts, count / elapsed, count / used


def agreement(pairs: list[tuple[Pair, str]], ours: list[float], theirs: list[float]) -> None:
    """Per kind of pair: both 1, both 0, and the pairs where the two differ (examples)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    for ((kind, predicted, gold, _), _), mine, spider in zip(pairs, ours, theirs, strict=True):
        label = (
            "both 1"
            if mine == spider == 1
            else "both 0"
            if mine == spider == 0
            else ("palaestra 1, Spider 0" if mine == 1 else "palaestra 0, Spider 1")
        )
        counts[kind][label] += 1
        if mine != spider and len(examples[label]) < 3:
            examples[label].append(f"{kind}: {predicted}  ||  gold: {gold}")
    print("| pairs | both 1 | both 0 | palaestra 1, Spider 0 | palaestra 0, Spider 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, count in counts.items():
        cells = " | ".join(
            str(count[label])
            for label in ("both 1", "both 0", "palaestra 1, Spider 0", "palaestra 0, Spider 1")
        )
        print(f"| {kind} ({sum(count.values())}) | {cells} |")
    for label, lines in examples.items():
        print(f"\n{label}, for example:")
        for line in lines:
            print(f"  {line[:400]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test-suite-eval", required=True, help="a test-suite-sql-eval checkout")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--suite-sizes", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "duckdb"])
    args = parser.parse_args()
    eval_exec_match = spider_eval(args.test_suite_eval)
    for domain in DOMAINS:
        database_path(domain)
    pairs = make_pairs(args.questions)
    duckdb_sql = [in_duckdb(predicted) for (_, predicted, _, _), _ in pairs]
    print(
        f"load: {os.getloadavg()[0]:.2f}; {len(pairs)} pairs: {dict(Counter(k for (k, *_), _ in pairs))}"
    )
    capacity = results.capacity
    with tempfile.TemporaryDirectory() as root:
        for size in args.suite_sizes:
            laid = lay_out(pairs, size, Path(root))
            spider, *rates = timed(
                lambda i, laid=laid: eval_exec_match(
                    str(laid[i][0]),
                    pairs[i][0][1],
                    pairs[i][0][2],
                    plug_value=False,
                    keep_distinct=True,
                    progress_bar_for_each_datapoint=False,
                ),
                len(pairs),
            )
            print(f"\n## suite={size}\n\n| grader | checks/s | per CPU s |\n| --- | ---: | ---: |")
            print(f"| Spider eval_exec_match (SQLite) | {rates[0]:,.0f} | {rates[1]:,.0f} |")
            verdicts_of = {}
            for backend, kept in itertools.product(args.backends, (True, False)):
                answers = duckdb_sql if backend == "duckdb" else [p for (_, p, _, _), _ in pairs]
                results.capacity = capacity if kept else 0
                verdicts_of[backend], *rates = timed(
                    lambda i, a=answers, b=backend, laid=laid: execution_match(
                        a[i], pairs[i][0][2], laid[i][0], backend=b, suite=laid[i][1]
                    ),
                    len(pairs),
                )
                how = "" if kept else ", result cache off"
                print(
                    f"| palaestra execution_match ({backend}{how}) | {rates[0]:,.0f} | "
                    f"{rates[1]:,.0f} |"
                )
            results.capacity = capacity
            for backend, verdicts in verdicts_of.items():
                print(f"\nAgreement, palaestra on {backend} vs Spider, suite={size}:\n")
                agreement(pairs, verdicts, spider)
    print(f"\nload: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
