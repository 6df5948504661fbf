"""Where the env server runs the calls of sessions whose env does not step inline.

``threads`` (the default): each such session has a thread of its own for its whole life;
its env is built, reset, stepped and closed there, so a slow step holds its own session
only. Envs whose async twins do I/O of their own run them on a private event loop of that
thread (their worker threads then belong to the session too). Calls reach the threads, and
their results the server's event loop, in batches (:class:`ThreadBridge`).

``processes``: the envs live in ``workers`` worker processes
(:class:`~palaestra.runner.process.ProcessEnvPool`), for CPU-bound envs that would hold
the GIL; sessions are spread over the processes, least-loaded first, and the steps of
sessions on different processes run in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

EXECUTORS = ("threads", "processes")


@dataclass(frozen=True)
class Stepping:
    """How sessions whose env does not step inline run: ``executor`` ``"threads"`` (a thread
    per session) or ``"processes"`` (``workers`` processes, default one per CPU)."""

    executor: Literal["threads", "processes"] = "threads"
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"step executor must be one of {EXECUTORS}, got {self.executor!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"step workers must be >= 1, got {self.workers}")

    @property
    def processes(self) -> int:
        return self.workers or os.cpu_count() or 1


class ThreadBridge:
    """Moves calls from the event loop to session threads and their results back, in
    batches: the calls made in one turn of the loop wake their threads together at its end
    (a thread woken while the loop still reads other sockets would fight it for the GIL:
    measured, a tenth fewer steps a second and nearly three times the context switches),
    and the results
    that finished meanwhile come back with one wake-up of the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._starts: list[tuple[queue.SimpleQueue[Any], Any]] = []
        self._done: deque[tuple[asyncio.Future[Any], bool, Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def start(self, calls: queue.SimpleQueue[Any], item: Any) -> None:
        """Called on the loop: put ``item`` on a thread's queue ``calls`` at the end of
        this turn (in order with the others)."""
        if not self._starts:
            try:
                self.loop.call_soon(self._start_all)
            except RuntimeError:  # the loop is closed: no later turn comes
                calls.put(item)
                return
        self._starts.append((calls, item))

    def _start_all(self) -> None:
        starts, self._starts = self._starts, []
        for calls, item in starts:
            calls.put(item)

    def deliver(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """Called on a session thread: settle ``future`` soon on the loop."""
        self._done.append((future, ok, value))
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            self._scheduled = False
        done = self._done
        while done:
            future, ok, value = done.popleft()
            if future.done():  # cancelled: its connection ended
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class SessionThread:
    """The thread of one session: runs its calls in order, one at a time."""

    def __init__(self, bridge: ThreadBridge, name: str):
        self._bridge = bridge
        self._calls: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def call(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on this thread after the calls before it; a future of the loop."""
        future = self._bridge.loop.create_future()
        self._bridge.start(self._calls, (future, fn, args))
        return future

    def call_async(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> asyncio.Future[Any]:
        """Run the coroutine ``fn(*args)`` on this thread's own event loop."""
        return self.call(self._run_coroutine, fn, args)

    def stop(self) -> None:
        """End the thread once the calls queued so far have run."""
        self._bridge.start(self._calls, None)

    def _run_coroutine(self, fn: Callable[..., Coroutine[Any, Any, Any]], args: tuple) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(fn(*args))

    def _serve(self) -> None:
        deliver = self._bridge.deliver
        while (item := self._calls.get()) is not None:
            future, fn, args = item
            try:
                deliver(future, True, fn(*args))
            except Exception as exc:
                deliver(future, False, exc)
            except BaseException as exc:  # SystemExit and the like must not reach the server
                deliver(future, False, RuntimeError(f"the env raised {type(exc).__name__}"))
        if self._loop is not None:
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()
