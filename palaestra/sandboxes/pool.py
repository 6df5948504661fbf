"""A warm pool of sandbox workers, shared by the backends that run ``_worker.py`` somewhere.

A worker is one interpreter running ``palaestra/sandboxes/_worker.py`` (a local process,
or a process inside a container) that speaks length-prefixed JSON messages: it forks a
confined runner per run, enforces the limits and the timeout, caps the output and reports
an :class:`ExecResult`. Backends differ only in how a worker is started, fed and killed
(:class:`FramedWorker`); pooling, runs and sessions live here once.
"""

from __future__ import annotations

import atexit
import json
import struct
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from itertools import count
from typing import Any, Generic, TypeVar

from palaestra.sandboxes.base import (
    ExecResult,
    Limits,
    SandboxBase,
    SessionBase,
    check_run_arguments,
    ended_by_memory_error,
    run_limits,
)

HOST_GRACE_SECONDS = 10.0
"""How long past a run's timeout the host waits for the worker before killing it."""

_request_ids = count(1)
T = TypeVar("T")


class SandboxWorkerError(RuntimeError):
    """A worker could not start or broke its protocol."""


class FramedWorker(ABC):
    """One warm worker and its framed protocol (4-byte big-endian length, then JSON).

    Subclasses provide the byte transport (:meth:`_write`, :meth:`_read`) and the life
    cycle (:attr:`alive`, :meth:`kill`, :meth:`stop`); they call :meth:`_handshake` once
    the worker is started.
    """

    report: dict[str, Any]

    def _handshake(self, deadline: float) -> None:
        """Wait for the worker's ready message (its isolation report) or raise."""
        self._buffer = bytearray()
        self.report = {}
        hello = self.receive(None, deadline=deadline)
        if hello is None or "error" in hello:
            self.kill()
            reason = hello["error"] if hello else "it exited during start-up"
            raise SandboxWorkerError(f"sandbox worker failed to start: {reason}")
        self.report = hello

    @abstractmethod
    def _write(self, data: bytes) -> bool:
        """Send bytes to the worker's stdin; False if the worker is gone."""

    @abstractmethod
    def _read(self, timeout: float) -> bytes | None:
        """Bytes from the worker's stdout: None if none came in ``timeout``, b"" at EOF."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the worker is still running."""

    @abstractmethod
    def kill(self) -> None:
        """Kill the worker and everything it started, now."""

    @abstractmethod
    def stop(self) -> None:
        """Ask the worker to exit cleanly (it deletes its files), killing it if it does not."""

    def send(self, message: dict[str, Any]) -> bool:
        body = json.dumps(message).encode()
        return self._write(struct.pack(">I", len(body)) + body)

    def receive(self, request_id: int | None, deadline: float) -> dict[str, Any] | None:
        """The reply to ``request_id`` (None: next message); None if the worker died or hung."""
        while True:
            message = self._pop_message()
            if message is not None:
                if request_id is None or message.get("id") == request_id:
                    return message
                continue  # a stale reply to an earlier request
            left = deadline - time.monotonic()
            chunk = self._read(left) if left > 0 else None
            if chunk is None:
                self.kill()
                return None
            if not chunk:
                return None
            self._buffer += chunk

    def _pop_message(self) -> dict[str, Any] | None:
        if len(self._buffer) < 4:
            return None
        size = struct.unpack(">I", self._buffer[:4])[0]
        if len(self._buffer) < 4 + size:
            return None
        body = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return json.loads(body)


def failure(message: str, started: float) -> ExecResult:
    """The result of a run the sandbox itself could not carry out."""
    return ExecResult("", message, exit_code=-1, duration=time.monotonic() - started)


def _to_result(reply: dict[str, Any]) -> ExecResult:
    stderr, exit_code = reply["stderr"], reply["exit_code"]
    return ExecResult(
        stdout=reply["stdout"],
        stderr=stderr,
        exit_code=exit_code,
        timed_out=reply["timed_out"],
        memory_exceeded=reply["memory_exceeded"] or ended_by_memory_error(exit_code, stderr),
        duration=reply["duration"],
        truncated=reply["truncated"],
    )


class WarmPool(Generic[T]):
    """Up to ``size`` started items (workers, containers, remote sandboxes), reused.

    ``start`` makes one (blocking until it is ready); ``discard`` ends one. Items are
    started on demand or by :meth:`warm`; :meth:`acquire` waits while all are in use, unless
    ``overflow=True`` (long holders such as sessions), which starts one more instead: a
    session must never wait for another session to end (a process running several episodes
    would deadlock). Items past ``size`` are discarded when released.
    """

    def __init__(
        self, size: int, start: Callable[[], T], discard: Callable[[T], None], *, owner: str
    ) -> None:
        if size < 1:
            raise ValueError(f"pool_size must be >= 1, got {size}")
        self.size = size
        self._start = start
        self._discard = discard
        self._owner = owner
        self._idle: list[T] = []
        self.latest_first = False
        """Hand out the most recently released item (warm caches) instead of the longest
        idle one; for items that are ready again as soon as they are released."""
        self._live = 0
        self._closed = False
        self._available = threading.Condition()

    def acquire(self, *, overflow: bool = False) -> T:
        with self._available:
            while True:
                if self._closed:
                    raise RuntimeError(f"this {self._owner} is closed; create a new one")
                if self._idle:
                    return self._idle.pop() if self.latest_first else self._idle.pop(0)
                if self._live < self.size or overflow:
                    self._live += 1
                    break
                self._available.wait()
        try:
            return self._start()
        except BaseException:
            with self._available:
                self._live -= 1
                self._available.notify()
            raise

    def release(self, item: T, healthy: bool) -> None:
        """Back to the pool if ``healthy``; otherwise discarded (in the background)."""
        with self._available:
            if healthy and not self._closed and self._live <= self.size:
                self._idle.append(item)
            else:
                self._live -= 1
                threading.Thread(target=self._discard, args=(item,)).start()
            self._available.notify()

    def warm(self, count: int | None = None) -> None:
        """Start ``count`` items now (default: the whole pool) so first uses are fast."""
        items = [self.acquire() for _ in range(min(count or self.size, self.size))]
        for item in items:
            self.release(item, healthy=True)

    def idle(self) -> list[T]:
        with self._available:
            return list(self._idle)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Discard every idle item; items in use are discarded when released."""
        with self._available:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._available.notify_all()
        for item in idle:
            self._discard(item)


def _discard_worker(worker: FramedWorker) -> None:
    worker.stop() if worker.alive else worker.kill()


class WorkerPoolSandbox(SandboxBase, ABC):
    """Runs code on a pool of warm workers; subclasses say how a worker starts.

    ``pool_size`` workers are started on demand (or all at once by :meth:`warm`) and
    reused; up to ``pool_size`` runs proceed in parallel, more wait for a free one.
    """

    replace_after_timeout = False
    """Discard a worker whose run timed out instead of reusing it."""

    def __init__(self, *, pool_size: int, limits: Limits | None, env: Mapping[str, str]) -> None:
        self._pool = WarmPool(
            pool_size, self._start_first_worker, _discard_worker, owner=type(self).__name__
        )
        self.pool_size = pool_size
        self.limits = limits or Limits()
        self._env = dict(env)
        self._report: dict[str, Any] | None = None
        _open_sandboxes.add(self)

    @abstractmethod
    def _start_worker(self) -> FramedWorker:
        """Start one worker (blocking until it is ready)."""

    def _first_worker_started(self, report: dict[str, Any]) -> None:
        """Called once with the first worker's isolation report (e.g. to warn)."""

    def _start_first_worker(self) -> FramedWorker:
        worker = self._start_worker()
        if self._report is None:
            self._report = worker.report
            # A worker that confines its next runner during a run is ready on release.
            self._pool.latest_first = worker.report.get("live_runners", 1) > 1
            self._first_worker_started(worker.report)
        return worker

    def _acquire(self, *, overflow: bool = False) -> FramedWorker:
        """A live worker: one that died while idle (killed from outside, its container
        removed) is discarded and another taken, so no run is lost to it."""
        while not (worker := self._pool.acquire(overflow=overflow)).alive:
            self._pool.release(worker, healthy=False)
        return worker

    def _release(self, worker: FramedWorker, healthy: bool) -> None:
        self._pool.release(worker, healthy and worker.alive)

    def warm(self, count: int | None = None) -> None:
        """Start ``count`` workers now (default: the whole pool) so first runs are fast."""
        self._pool.warm(count)

    # -- runs ---------------------------------------------------------------------------------

    def _job(self, **fields: Any) -> dict[str, Any]:
        return {"id": next(_request_ids), "env": self._env, "files": {}, "stdin": "", **fields}

    def _limits_for(
        self, timeout: float, memory_mb: int | None, max_output_bytes: int | None = None
    ) -> dict[str, int]:
        return run_limits(self.limits, timeout, memory_mb, max_output_bytes)

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        memory_mb: int | None = None,
        max_output_bytes: int | None = None,
    ) -> ExecResult:
        """Run ``code`` as a fresh ``__main__`` in a private work dir; never raises for bad code.

        ``files`` (relative path -> text) are written into the work dir first; the dir is on
        ``sys.path``, so the code can import them. ``stdin`` is the program's standard input.
        ``memory_mb`` and ``max_output_bytes`` replace this sandbox's limits for this run.
        """
        checked = check_run_arguments(timeout, files)
        started = time.monotonic()
        job = self._job(
            code=code,
            stdin=stdin,
            files=checked,
            timeout=timeout,
            session=False,
            limits=self._limits_for(timeout, memory_mb, max_output_bytes),
        )
        worker = self._acquire()
        healthy = False
        try:
            if not worker.send(job):
                return failure("sandbox worker died before the run started", started)
            reply = worker.receive(job["id"], time.monotonic() + timeout + HOST_GRACE_SECONDS)
            if reply is None:
                return failure("sandbox worker died or stopped answering", started)
            if "error" in reply:
                return failure(reply["error"], started)
            result = _to_result(reply)
            healthy = not (result.timed_out and self.replace_after_timeout)
            return result
        finally:
            self._release(worker, healthy)

    def session(self, *, memory_mb: int | None = None) -> WorkerSession:
        """A persistent interpreter (state kept across ``run`` calls) in its own work dir."""
        return WorkerSession(self, memory_mb=memory_mb)

    def close(self) -> None:
        """Stop every idle worker; runs in flight finish first."""
        self._pool.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> WorkerPoolSandbox:
        """A sandbox is a shared service: copies of an env keep using the same pool."""
        return self


_open_sandboxes: weakref.WeakSet[WorkerPoolSandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    """Stop every sandbox still open when the interpreter exits, while modules still work (a
    sandbox dropped earlier needs nothing: its workers exit when their pipes close)."""
    for sandbox in list(_open_sandboxes):
        sandbox.close()


class WorkerSession(SessionBase):
    """A REPL kept across turns; holds one worker while open (started past the pool size
    when every worker is busy, so sessions never wait for each other).

    If a call times out or the code exits, the worker is replaced by a fresh one on the
    next call and that call's stderr starts with a notice that earlier state is gone.
    """

    def __init__(self, sandbox: WorkerPoolSandbox, *, memory_mb: int | None = None) -> None:
        self._sandbox = sandbox
        self._memory_mb = memory_mb
        self._worker: FramedWorker | None = None
        self._started_before = False
        self._lock = threading.Lock()

    def _start(self, timeout: float) -> str | None:
        """Start the REPL in a worker; returns an error message on failure."""
        worker = self._sandbox._acquire(overflow=True)
        job = self._sandbox._job(
            session=True,
            timeout=timeout,
            limits=self._sandbox._limits_for(timeout, self._memory_mb),
        )
        reply = None
        if worker.send(job):
            reply = worker.receive(job["id"], time.monotonic() + HOST_GRACE_SECONDS)
        if reply is None or "error" in reply:
            self._sandbox._release(worker, healthy=False)
            return reply["error"] if reply else "sandbox worker died while starting a session"
        self._worker = worker
        return None

    def run(self, code: str, *, timeout: float = 5.0) -> ExecResult:
        """Run a cell; its variables, imports and files stay for the next call."""
        check_run_arguments(timeout, None)
        started = time.monotonic()
        with self._lock:
            notice = ""
            if self._worker is None:
                if self._started_before:
                    notice = "[the interpreter was restarted; earlier variables are gone]\n"
                error = self._start(timeout)
                if error is not None:
                    return failure(error, started)
                self._started_before = True
            request = {"id": next(_request_ids), "code": code, "timeout": timeout}
            reply = None
            if self._worker.send(request):
                deadline = time.monotonic() + timeout + HOST_GRACE_SECONDS
                reply = self._worker.receive(request["id"], deadline)
            if reply is None or "error" in reply:
                self._end(healthy=False)
                return failure(
                    notice + (reply["error"] if reply else "sandbox worker died"), started
                )
            result = _to_result(reply)
            if not reply["session_alive"]:
                self._end(healthy=not (result.timed_out and self._sandbox.replace_after_timeout))
            if notice:
                result = ExecResult(**{**result.__dict__, "stderr": notice + result.stderr})
            return result

    def _end(self, healthy: bool) -> None:
        if self._worker is not None:
            self._sandbox._release(self._worker, healthy)
            self._worker = None

    def close(self) -> None:
        """End the session: the interpreter's state and work dir are deleted."""
        with self._lock:
            if self._worker is not None:
                healthy = self._worker.send({"op": "close"})
                self._end(healthy)
