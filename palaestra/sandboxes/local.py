"""The default backend: confined local processes forked from a warm pool of interpreters.

Each run is forked from a pre-started interpreter (no interpreter start-up per call) and
confined by what the OS offers, strongest first (``isolation_report()`` says which):

* user, network and PID namespaces: no network at all, every process the code starts is
  killed with it, process limits counted per run (Linux with unprivileged user namespaces);
* Landlock (Linux >= 5.13): reads only from system libraries, this Python and its
  packages (plus ``readable_paths``), writes only inside the private work dir, no TCP
  (ABI >= 4), no signals to processes outside the sandbox (ABI >= 6);
* always: rlimits (CPU time, address space, processes, file size, open files), a new
  session killed as a group plus a subreaper sweep for escaped children, a private
  temporary work dir deleted afterwards, an environment built from an allow-list, capped
  output, no capabilities; as root (where RLIMIT_NPROC does not bind) a pids cgroup.

Where neither namespaces nor Landlock network rules exist, network calls made through
Python's socket module are refused by an audit hook; that fallback is best effort (a
subprocess or ctypes can get around it), so prefer a kernel that allows one of the above
or the docker backend.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Mapping
from itertools import count
from pathlib import Path
from typing import Any

from palaestra.sandboxes.base import (
    ExecResult,
    Limits,
    SandboxBase,
    SessionBase,
    check_run_arguments,
)

WORKER_SCRIPT = Path(__file__).with_name("_worker.py")
SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "PYTHONIOENCODING")
HOST_GRACE_SECONDS = 10.0
_request_ids = count(1)


def safe_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The only environment sandboxed code sees: an allow-list, never the caller's secrets."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


class SandboxWorkerError(RuntimeError):
    """A worker could not start or broke its protocol."""


class _Worker:
    """One warm interpreter process and its framed pipe protocol."""

    def __init__(self, config: dict[str, Any], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-B", str(WORKER_SCRIPT), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
        self._buffer = b""
        self.report: dict[str, Any] = {}
        hello = self.receive(None, deadline=time.monotonic() + 30)
        if hello is None or "error" in hello:
            self.kill()
            reason = hello["error"] if hello else "it exited during start-up"
            raise SandboxWorkerError(f"sandbox worker failed to start: {reason}")
        self.report = hello

    def _remove_cgroup(self) -> None:
        if self.report.get("cgroup"):
            with contextlib.suppress(OSError):
                os.rmdir(self.report["cgroup"])

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: dict[str, Any]) -> bool:
        body = json.dumps(message).encode()
        try:
            self.process.stdin.write(struct.pack(">I", len(body)) + body)
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def receive(self, request_id: int | None, deadline: float) -> dict[str, Any] | None:
        """The reply to ``request_id`` (None: next message); None if the worker died or hung."""
        fd = self.process.stdout.fileno()
        while True:
            message = self._pop_message()
            if message is not None:
                if request_id is None or message.get("id") == request_id:
                    return message
                continue  # a stale reply to an earlier request
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk

    def _pop_message(self) -> dict[str, Any] | None:
        if len(self._buffer) < 4:
            return None
        size = struct.unpack(">I", self._buffer[:4])[0]
        if len(self._buffer) < 4 + size:
            return None
        body, self._buffer = self._buffer[4 : 4 + size], self._buffer[4 + size :]
        return json.loads(body)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._close_pipes()
        self._remove_cgroup()

    def stop(self) -> None:
        """Ask the worker to exit (it deletes its files), killing it if it does not."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()
        self._remove_cgroup()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def _failure(message: str, started: float) -> ExecResult:
    return ExecResult("", message, exit_code=-1, duration=time.monotonic() - started)


def _to_result(reply: dict[str, Any]) -> ExecResult:
    return ExecResult(
        stdout=reply["stdout"],
        stderr=reply["stderr"],
        exit_code=reply["exit_code"],
        timed_out=reply["timed_out"],
        memory_exceeded=reply["memory_exceeded"],
        duration=reply["duration"],
        truncated=reply["truncated"],
    )


class LocalSandbox(SandboxBase):
    """Run untrusted Python locally, confined, from a warm pool of interpreters.

    ``pool_size`` interpreters are started on demand (or all at once by :meth:`warm`) and
    reused; up to ``pool_size`` runs proceed in parallel, more wait for a free one.
    ``namespaces`` / ``landlock``: None uses them where the OS allows, True requires them
    (start-up fails otherwise), False turns them off. ``preload`` names modules the
    interpreters import once, so code that imports them pays nothing (e.g. ``("numpy",)``).
    ``readable_paths`` adds files or directories the code may read (with Landlock, nothing
    else outside the system, Python and the work dir is readable); ``env`` adds variables
    to the allow-listed environment.

    Example::

        with LocalSandbox() as sandbox:
            result = sandbox.run("print(6 * 7)", timeout=2)
            assert result.stdout == "42\\n"
    """

    def __init__(
        self,
        *,
        pool_size: int | None = None,
        limits: Limits | None = None,
        namespaces: bool | None = None,
        landlock: bool | None = None,
        preload: tuple[str, ...] = (),
        readable_paths: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeError(
                f"LocalSandbox needs Linux (this is {sys.platform}); use the docker backend "
                "(`pip install 'palaestra[docker]'`, DockerSandbox) on other systems"
            )
        self.pool_size = pool_size or max(2, os.cpu_count() or 2)
        if self.pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.limits = limits or Limits()
        self._config = {
            "namespaces": namespaces,
            "landlock": landlock,
            "preload": list(preload),
            "readable": [str(path) for path in readable_paths],
            "max_processes": self.limits.max_processes,
        }
        self._env = safe_environment(env)
        self._idle: list[_Worker] = []
        self._live = 0
        self._closed = False
        self._available = threading.Condition()
        self._report: dict[str, Any] | None = None

    # -- pool ---------------------------------------------------------------------------------

    def _acquire(self) -> _Worker:
        with self._available:
            while True:
                if self._closed:
                    raise RuntimeError("this LocalSandbox is closed; create a new one")
                if self._idle:
                    return self._idle.pop()
                if self._live < self.pool_size:
                    self._live += 1
                    break
                self._available.wait()
        try:
            worker = _Worker(self._config, self._env)
        except BaseException:
            with self._available:
                self._live -= 1
                self._available.notify()
            raise
        if self._report is None:
            self._report = worker.report
            if not worker.report["namespaces"] and worker.report["landlock_abi"] < 6:
                warnings.warn(
                    "LocalSandbox: no PID namespace and no Landlock signal scoping on this "
                    "system, so sandboxed code can signal your other processes; use a kernel "
                    "with unprivileged user namespaces or the docker backend for untrusted code",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return worker

    def _release(self, worker: _Worker, healthy: bool) -> None:
        with self._available:
            if healthy and worker.alive and not self._closed:
                self._idle.append(worker)
            else:
                self._live -= 1
                threading.Thread(target=worker.stop if worker.alive else worker.kill).start()
            self._available.notify()

    def warm(self, count: int | None = None) -> None:
        """Start ``count`` interpreters now (default: the whole pool) so first runs are fast."""
        workers = [self._acquire() for _ in range(min(count or self.pool_size, self.pool_size))]
        for worker in workers:
            self._release(worker, healthy=True)

    def worker_pids(self) -> list[int]:
        """Process ids of the idle warm interpreters (for monitoring and tests)."""
        with self._available:
            return [worker.process.pid for worker in self._idle]

    def isolation_report(self) -> dict[str, Any]:
        """Which mechanisms confine the code on this machine (starts a worker if needed)."""
        if self._report is None:
            self.warm(1)
        report = self._report or {}
        abi = report.get("landlock_abi", 0)
        namespaces = bool(report.get("namespaces"))
        return {
            "network": "namespace" if namespaces else "landlock" if abi >= 4 else "audit-hook",
            "processes": "pid-namespace" if namespaces else "process-group+subreaper",
            "filesystem_writes": "landlock" if abi else "file-permissions",
            "signals": "pid-namespace" if namespaces else "landlock" if abi >= 6 else "none",
            "filesystem_reads": "landlock" if abi else "file-permissions",
            "process_count": "pids-cgroup" if report.get("cgroup") else "rlimit",
            "landlock_abi": abi,
        }

    # -- runs ---------------------------------------------------------------------------------

    def _job(self, **fields: Any) -> dict[str, Any]:
        return {"id": next(_request_ids), "env": self._env, "files": {}, "stdin": "", **fields}

    def _limits_for(self, timeout: float, memory_mb: int | None) -> dict[str, int]:
        limits = dict(self.limits.__dict__)
        limits["cpu_seconds"] = min(self.limits.cpu_seconds, math.ceil(timeout) + 1)
        if memory_mb is not None:
            limits["memory_mb"] = Limits(memory_mb=memory_mb).memory_mb
        return limits

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        memory_mb: int | None = None,
    ) -> ExecResult:
        """Run ``code`` as a fresh ``__main__`` in a private work dir; never raises for bad code.

        ``files`` (relative path -> text) are written into the work dir first; the dir is on
        ``sys.path``, so the code can import them. ``stdin`` is the program's standard input.
        """
        checked = check_run_arguments(timeout, files)
        started = time.monotonic()
        job = self._job(
            code=code,
            stdin=stdin,
            files=checked,
            timeout=timeout,
            session=False,
            limits=self._limits_for(timeout, memory_mb),
        )
        worker = self._acquire()
        healthy = False
        try:
            if not worker.send(job):
                return _failure("sandbox worker died before the run started", started)
            reply = worker.receive(job["id"], time.monotonic() + timeout + HOST_GRACE_SECONDS)
            if reply is None:
                return _failure("sandbox worker died or stopped answering", started)
            if "error" in reply:
                return _failure(reply["error"], started)
            healthy = True
            return _to_result(reply)
        finally:
            self._release(worker, healthy)

    def session(self, *, memory_mb: int | None = None) -> LocalSession:
        """A persistent interpreter (state kept across ``run`` calls) in its own work dir."""
        return LocalSession(self, memory_mb=memory_mb)

    def close(self) -> None:
        """Stop every idle interpreter; runs in flight finish first."""
        with self._available:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._available.notify_all()
        for worker in idle:
            worker.stop()

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalSandbox:
        """A sandbox is a shared service: copies of an env keep using the same pool."""
        return self

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


class LocalSession(SessionBase):
    """A REPL kept across turns; holds one interpreter of the pool while open.

    If a call times out or the code exits, the interpreter is replaced by a fresh one on
    the next call and that call's stderr starts with a notice that earlier state is gone.
    """

    def __init__(self, sandbox: LocalSandbox, *, memory_mb: int | None = None) -> None:
        self._sandbox = sandbox
        self._memory_mb = memory_mb
        self._worker: _Worker | None = None
        self._started_before = False
        self._lock = threading.Lock()

    def _start(self, timeout: float) -> str | None:
        """Start the REPL in a worker; returns an error message on failure."""
        worker = self._sandbox._acquire()
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
                    return _failure(error, started)
                self._started_before = True
            request = {"id": next(_request_ids), "code": code, "timeout": timeout}
            reply = None
            if self._worker.send(request):
                deadline = time.monotonic() + timeout + HOST_GRACE_SECONDS
                reply = self._worker.receive(request["id"], deadline)
            if reply is None or "error" in reply:
                self._end(healthy=False)
                return _failure(
                    notice + (reply["error"] if reply else "sandbox worker died"), started
                )
            if not reply["session_alive"]:
                self._end(healthy=True)
            result = _to_result(reply)
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
