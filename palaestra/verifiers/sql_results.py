"""The results of agents' queries, answered again without running (both SQL backends).

>>> results.submit(results.key("sqlite", path, sql), 10_000, 5.0, send)()  # doctest: +SKIP

The databases are read-only, so a query asked again of the same file (a GRPO group's
repeated answer, an answer the agent already ran as a tool call) gets the result it got
before without a worker round trip, and a query asked while the same one runs (a group's
answers checked on threads at once) waits for that run instead of starting its own. A kept
result is given only to a call whose time limit it ran within; failures are never kept (a
time-out depends on the machine's load), nor is a query that may answer differently each
run (:data:`VOLATILE`). The key holds the file's version, so a rebuilt file is asked anew.
A result answers a call under a lower row cap (its first rows), and one that was not cut
answers any cap: a short result the ``sql`` tool showed answers the check of that query.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path

from palaestra.verifiers.sql_backend import KILL_GRACE_S, QueryResult, SQLError, row_bytes
from palaestra.verifiers.sql_files import file_version_or_none

__all__ = ["VOLATILE", "ResultCache", "ResultKey", "results"]

VOLATILE = re.compile(
    r"(?i)\b(?:\w*random\w*|\w*uuid\w*|now|today|\w*current\w*|transaction_timestamp|"
    r"localtime\w*|nextval|currval|setseed|\w*changes|last_insert_rowid)\b"
)
"""Names a query that may answer differently each run can hardly be written without
(``random()``, ``now()``, SQLite's ``date('now')``...): such a query always runs. A false
alarm only costs a run."""

ResultKey = tuple[str, str, tuple[int, int, int], str]
"""(backend dialect, database file, its version, query text)."""

Send = Callable[[], Callable[[], QueryResult]]
"""Sends a query now; the function it returns gives the result (or raises SQLError)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    """A run's result, the row cap and time it ran with, and its size in bytes."""

    result: QueryResult
    max_rows: int
    """The row cap it ran under."""
    seconds: float
    size: int

    def answers(self, max_rows: int, timeout: float) -> QueryResult | None:
        """The result under ``max_rows`` (its first rows) if this run tells it within
        ``timeout``: a result that was cut knows no row past its own cap."""
        if self.seconds > timeout or (self.result.truncated and max_rows > self.max_rows):
            return None
        if len(self.result.rows) > max_rows:
            return QueryResult(self.result.columns, self.result.rows[:max_rows], True)
        return self.result


class ResultCache:
    """Results of agents' queries by :data:`ResultKey` (module docstring), the most
    recently used kept up to ``capacity`` bytes (the query's text and its values; none over
    ``largest``; ``capacity=0`` keeps none); one per query and file, answering the row caps
    it tells (:meth:`_Kept.answers`). ``hits`` counts the calls answered without a run of
    their own."""

    def __init__(self, capacity: int = 64_000_000, largest: int = 1_000_000) -> None:
        self.capacity, self.largest = capacity, largest
        self.hits = 0
        self._lock = threading.Lock()
        self._kept: OrderedDict[ResultKey, _Kept] = OrderedDict()
        self._held = 0
        self._running: dict[tuple[ResultKey, int, float], Future[QueryResult | None]] = {}

    @staticmethod
    def key(dialect: str, path: Path, sql: str) -> ResultKey | None:
        """The key of ``sql`` on the file at ``path``; None when it is not to be reused."""
        version = file_version_or_none(path)
        if version is None or VOLATILE.search(sql):
            return None
        return dialect, str(path), version, sql

    def submit(
        self, key: ResultKey | None, max_rows: int, timeout: float, send: Send
    ) -> Callable[[], QueryResult]:
        """The result for ``key`` under ``max_rows`` rows: from a kept run that tells it
        and ran within ``timeout`` seconds, else that of the same call running now (its
        failure too), else ``send()``'s, kept. The function returned gives it (call it
        once)."""
        if key is None:
            return send()
        flight_key = (key, max_rows, timeout)
        with self._lock:
            kept = self._kept.get(key)
            answer = kept.answers(max_rows, timeout) if kept is not None else None
            if answer is not None:
                self._kept.move_to_end(key)
                self.hits += 1
                return lambda: answer
            running = self._running.get(flight_key)
            if running is None:
                flight = self._running[flight_key] = Future()
        if running is not None:
            return lambda: self._follow(flight_key, running, send)
        started = time.monotonic()
        try:
            pending = send()
        except BaseException as error:
            self._land(flight_key, flight, error)
            raise

        def result() -> QueryResult:
            try:
                answer = pending()
            except BaseException as error:
                self._land(flight_key, flight, error)
                raise
            self._keep(key, answer, max_rows, time.monotonic() - started)
            self._land(flight_key, flight, answer)
            return answer

        return result

    def _follow(
        self,
        flight_key: tuple[ResultKey, int, float],
        running: Future[QueryResult | None],
        send: Send,
    ) -> QueryResult:
        """The outcome of the same call's run (its SQLError too); a run of its own when
        that one ended otherwise, or did not end in time (its caller never asked: it is
        forgotten)."""
        try:
            answer = running.result(timeout=flight_key[2] + KILL_GRACE_S + 1.0)
        except FutureTimeout:
            with self._lock:
                if self._running.get(flight_key) is running:
                    del self._running[flight_key]
            answer = None
        except SQLError as error:  # a copy: one exception raised on many threads mixes tracebacks
            raise SQLError(str(error), syntax=error.syntax) from None
        if answer is None:
            return send()()
        with self._lock:
            self.hits += 1
        return answer

    def _land(
        self,
        flight_key: tuple[ResultKey, int, float],
        flight: Future[QueryResult | None],
        outcome: QueryResult | BaseException,
    ) -> None:
        """End the run in flight: the calls waiting for it get ``outcome`` (an SQLError as
        it is; any other exception makes them run the query themselves)."""
        with self._lock:
            if self._running.get(flight_key) is flight:
                del self._running[flight_key]
        if isinstance(outcome, SQLError):
            flight.set_exception(outcome)
        else:
            flight.set_result(outcome if isinstance(outcome, QueryResult) else None)

    def _keep(self, key: ResultKey, result: QueryResult, max_rows: int, seconds: float) -> None:
        """Keep ``result`` unless it is over ``largest``; it replaces the run kept before
        (which could not answer this call)."""
        size = len(key[3])  # the query's text is held too
        for row in result.rows:
            size += row_bytes(row)
            if size > self.largest:
                return
        with self._lock:
            old = self._kept.pop(key, None)
            self._held += size - (old.size if old else 0)
            self._kept[key] = _Kept(result, max_rows, seconds, size)
            while self._held > self.capacity:
                self._held -= self._kept.popitem(last=False)[1].size

    def clear(self) -> None:
        """Forget every kept result (runs in flight go on)."""
        with self._lock:
            self._kept.clear()
            self._held = 0


results = ResultCache()
"""The cache both backends answer agents' queries from."""
