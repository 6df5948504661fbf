"""Run CPU-bound grading calls in killable worker processes, with a hard per-call timeout.

A thread stuck in sympy cannot be stopped, and ``signal.alarm`` only works in the main
thread, so a grader that must survive hostile inputs (``9^{9^{9^9}}``) runs them in a child
process: when a call overruns its timeout the child is killed (its whole session) and a
fresh one takes its place on the next call. Nothing leaks: no thread is left running and
every killed process is reaped. Children also exit by themselves when the parent goes away
(their request pipe closes).

>>> pool = WorkerPool(preload=("fractions",))
>>> pool.call(pow, (2, 10), timeout=5.0)
1024
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from multiprocessing.connection import Connection
from typing import Any

STARTUP_TIMEOUT_S = 120.0
"""How long a new worker may take to import its modules before it counts as broken."""
SERVED_KEYS = 64
"""How many ``prefer`` keys of its latest calls a worker is remembered by."""


class WorkerTimeout(TimeoutError):
    """A call ran past its timeout; its worker was killed."""


class WorkerError(RuntimeError):
    """The call raised inside the worker (the message carries the remote exception)."""


class WorkerLost(WorkerError):
    """The worker's answer could not be read (it died, or its pipe broke mid-reply); the
    worker is never used again."""


Call = tuple[Callable[..., Any], tuple[Any, ...]]
"""A function (importable by name) and its arguments."""


class _Worker:
    """One child process serving calls over a pair of pipes."""

    def __init__(self, preload: Sequence[str], memory_mb: int | None, warmup: Call | None):
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        args = [sys.executable, "-m", __name__, str(request_read), str(result_write)]
        args += [str(memory_mb or 0), *preload]
        self.process = subprocess.Popen(
            args, pass_fds=(request_read, result_write), start_new_session=True
        )
        os.close(request_read)
        os.close(result_write)
        self._requests = Connection(request_write, readable=False)
        self._results = Connection(result_read, writable=False)
        self.served: OrderedDict[Hashable, int] = OrderedDict()
        """The ``prefer`` keys of its latest calls (:meth:`WorkerPool.submit`), each with
        the pool's count of calls when it was last sent here."""
        if not self._results.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise RuntimeError(f"grading worker did not start within {STARTUP_TIMEOUT_S:.0f} s")
        try:
            ok, message = self._recv()
        except WorkerLost as exc:
            ok, message = False, str(exc)
        if not ok:
            self.kill()
            raise RuntimeError(f"grading worker failed to start: {message}")
        if warmup is not None:
            try:
                self.call(*warmup, timeout=STARTUP_TIMEOUT_S)
            except (WorkerTimeout, WorkerError) as exc:
                self.kill()
                raise RuntimeError(f"grading worker failed its warm-up call: {exc}") from exc

    def _recv(self) -> tuple[bool, Any]:
        try:
            return self._results.recv()
        except (EOFError, OSError) as error:
            code = self.process.poll()
            raise WorkerLost(f"worker process died (exit code {code})") from error

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Any:
        self.send(fn, args)
        return self.receive(fn, time.monotonic() + timeout, timeout)

    def send(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._requests.send((fn, args))

    def receive(self, fn: Callable[..., Any], deadline: float, timeout: float) -> Any:
        """The answer to the call sent last; past ``deadline`` the child is killed."""
        if not self._results.poll(max(0.0, deadline - time.monotonic())):
            self.kill()
            raise WorkerTimeout(f"{getattr(fn, '__name__', fn)} ran past {timeout} s; killed")
        ok, value = self._recv()
        if not ok:
            raise WorkerError(value)
        return value

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Kill the child's whole session and reap it."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
        self.process.wait()
        self._requests.close()
        self._results.close()


class WorkerPool:
    """Up to ``max_workers`` lazily started worker processes shared by all threads.

    ``preload`` names modules each worker imports before serving and ``warmup`` is a call
    each new worker makes first (so import and first-use costs never count against a call's
    timeout); ``memory_mb`` caps each worker's address space.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        preload: Sequence[str] = (),
        memory_mb: int | None = 4096,
        warmup: Call | None = None,
    ):
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers or max(1, min(4, os.cpu_count() or 1))
        self.preload = tuple(preload)
        self.memory_mb = memory_mb
        self.warmup = warmup
        self._idle: list[_Worker] = []
        self._started = 0
        self._sent = 0
        self._cond = threading.Condition()
        _pools.add(self)

    def _acquire(self, prefer: Hashable | None) -> _Worker:
        with self._cond:
            while True:
                while not self._idle and self._started >= self.max_workers:
                    self._cond.wait()
                if not self._idle:
                    break
                worker = self._take_idle(prefer)
                if worker.alive:
                    return worker
                worker.kill()  # killed while idle (the OOM killer, say): reap it, start anew
                self._started -= 1
            self._started += 1
        try:
            return _Worker(self.preload, self.memory_mb, self.warmup)
        except BaseException:
            self._discard()
            raise

    def _take_idle(self, prefer: Hashable | None) -> _Worker:
        """An idle worker: of those whose latest calls had ``prefer``, the one it was sent
        to last; else the one that went idle last."""
        served = [(w.served[prefer], i) for i, w in enumerate(self._idle) if prefer in w.served]
        return self._idle.pop(max(served)[1] if served else -1)

    def _discard(self) -> None:
        with self._cond:
            self._started -= 1
            self._cond.notify()

    def call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        *,
        timeout: float,
        prefer: Hashable | None = None,
    ) -> Any:
        """``fn(*args)`` in a worker; raises :class:`WorkerTimeout` past ``timeout`` seconds.

        ``fn`` must be importable by name (a module-level function) and ``args`` picklable.
        """
        return self.submit(fn, args, timeout=timeout, prefer=prefer).result()

    def submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        *,
        timeout: float,
        prefer: Hashable | None = None,
    ) -> PendingCall:
        """Send ``fn(*args)`` to a worker and return at once; the caller works meanwhile and
        must then call :meth:`PendingCall.result` (which hands the worker back). The timeout
        counts from now. ``prefer``: a key of what the call needs (a database a worker
        keeps loaded, say); of the idle workers whose latest :data:`SERVED_KEYS` calls had
        it, the one it went to last is taken, else any idle one (never waiting for a busy
        one), so calls of a key keep to one worker while it is free."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        worker = self._acquire(prefer)
        if prefer is not None:
            with self._cond:
                self._sent += 1
                worker.served.pop(prefer, None)
                worker.served[prefer] = self._sent
                if len(worker.served) > SERVED_KEYS:
                    worker.served.popitem(last=False)
        try:
            worker.send(fn, args)
        except BaseException:
            self._drop(worker)
            raise
        return PendingCall(self, worker, fn, time.monotonic() + timeout, timeout)

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def _drop(self, worker: _Worker) -> None:
        worker.kill()
        self._discard()

    @property
    def pids(self) -> list[int]:
        """Process ids of the idle workers (for tests and monitoring)."""
        with self._cond:
            return [w.process.pid for w in self._idle]

    def close(self) -> None:
        """Stop every idle worker (busy ones are killed by their own call's timeout)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._started -= len(idle)
        for worker in idle:
            worker.kill()


class PendingCall:
    """A call sent to a worker of ``pool`` (:meth:`WorkerPool.submit`); :meth:`result`
    waits for its answer once."""

    def __init__(
        self,
        pool: WorkerPool,
        worker: _Worker,
        fn: Callable[..., Any],
        deadline: float,
        timeout: float,
    ) -> None:
        self._pool, self._worker, self._fn = pool, worker, fn
        self._deadline, self._timeout = deadline, timeout

    def result(self) -> Any:
        """The call's value; :class:`WorkerTimeout` past its deadline (the worker is killed),
        :class:`WorkerError` if it raised."""
        worker, self._worker = self._worker, None
        if worker is None:
            raise RuntimeError("the result of this call was already taken")
        try:
            value = worker.receive(self._fn, self._deadline, self._timeout)
        except WorkerLost:
            self._pool._drop(worker)
            raise
        except WorkerError:
            if worker.alive:
                self._pool._release(worker)
            else:
                self._pool._drop(worker)
            raise
        except BaseException:
            self._pool._drop(worker)
            raise
        self._pool._release(worker)
        return value


_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


@atexit.register
def _close_all_pools() -> None:
    for pool in list(_pools):
        pool.close()


def _serve(request_fd: int, result_fd: int, memory_mb: int, preload: Sequence[str]) -> None:
    requests = Connection(request_fd, writable=False)
    results = Connection(result_fd, readable=False)
    try:
        if memory_mb:
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for module in preload:
            importlib.import_module(module)
    except BaseException as exc:
        results.send((False, repr(exc)))
        return
    results.send((True, None))
    while True:
        try:
            fn, args = requests.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, fn(*args))
        except BaseException as exc:  # MemoryError, RecursionError, anything sympy raises
            reply = (False, f"{type(exc).__name__}: {exc}")
        _reply(results, reply)


def _reply(results: Connection, reply: tuple[bool, Any]) -> None:
    """Send ``reply``; one that cannot be pickled (too big for the memory cap, or not
    picklable) is answered by an error saying so. Pickling happens before any byte is
    written, so the pipe stays in step."""
    try:
        results.send(reply)
    except (MemoryError, pickle.PicklingError, TypeError, AttributeError, OverflowError) as exc:
        results.send((False, f"the answer could not be sent back: {type(exc).__name__}: {exc}"))


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
