"""Grading workers: a call sent ahead runs while the caller works, under its own deadline."""

from __future__ import annotations

import os
import signal
import time

import pytest

from palaestra.verifiers.worker import WorkerError, WorkerPool, WorkerTimeout


@pytest.fixture
def pool():
    pool = WorkerPool(1, preload=("time",))
    pool.call(abs, (-1,), timeout=60)  # started before any timing
    yield pool
    pool.close()


def test_a_submitted_call_runs_while_the_caller_works(pool):
    started = time.monotonic()
    pending = pool.submit(time.sleep, (0.5,), timeout=5)
    time.sleep(0.5)  # the caller's own work
    pending.result()
    assert time.monotonic() - started < 0.85  # one after the other would take 1 s


def test_the_deadline_of_a_submitted_call_counts_from_the_submit(pool):
    pending = pool.submit(time.sleep, (30,), timeout=0.5)
    time.sleep(0.6)
    waited = time.monotonic()
    with pytest.raises(WorkerTimeout):
        pending.result()
    assert time.monotonic() - waited < 0.3
    assert pool.call(abs, (-2,), timeout=60) == 2  # a new worker took the killed one's place


def test_a_result_is_taken_once_and_its_worker_goes_back(pool):
    (pid,) = pool.pids
    pending = pool.submit(abs, (-3,), timeout=5)
    assert pool.pids == []  # the worker is the call's until its result is taken
    assert pending.result() == 3
    with pytest.raises(RuntimeError, match="already taken"):
        pending.result()
    with pytest.raises(WorkerError, match="ValueError"):
        pool.submit(int, ("x",), timeout=5).result()
    assert pool.pids == [pid]  # a call that raised does not cost its worker


def test_a_worker_killed_while_idle_is_replaced(pool):
    (pid,) = pool.pids
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
    assert pool.call(abs, (-4,), timeout=60) == 4
    assert pool.pids != [pid]


def test_a_call_goes_to_an_idle_worker_that_served_its_key():
    pool = WorkerPool(2, memory_mb=None)
    try:
        first, second = pool.submit(os.getpid, timeout=60), pool.submit(os.getpid, timeout=60)
        pids = {first.result(), second.result()}
        assert len(pids) == 2  # both started
        owner = pool.call(os.getpid, timeout=60, prefer="shop.sqlite")
        other = pool.call(os.getpid, timeout=60, prefer="bank.sqlite")
        for _ in range(5):
            assert pool.call(os.getpid, timeout=60, prefer="shop.sqlite") == owner
        busy = pool.submit(time.sleep, (0.3,), timeout=60, prefer="shop.sqlite")
        assert pool.call(os.getpid, timeout=60, prefer="shop.sqlite") != owner  # never waits
        busy.result()
        assert owner in pids and other in pids
    finally:
        pool.close()
