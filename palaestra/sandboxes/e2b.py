"""The E2B backend: runs code in E2B cloud sandboxes (microVMs), a few kept warm in a pool.

One-shot runs execute ``python3`` in a fresh directory of a pooled E2B sandbox, under
``ulimit`` (the :class:`Limits`) and ``timeout --signal=KILL``; a run that times out costs
its E2B sandbox (it is killed and the pool creates another). Sessions use the code
interpreter's stateful contexts (a Jupyter kernel each). The sandboxes are created without
internet access unless ``allow_internet=True``. Needs ``pip install 'palaestra[e2b]'`` and
an API key in ``E2B_API_KEY`` (or ``api_key=``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from palaestra.sandboxes.base import (
    ExecResult,
    Limits,
    SandboxBase,
    SessionBase,
    check_run_arguments,
    ended_by_memory_error,
    run_limits,
)
from palaestra.sandboxes.pool import HOST_GRACE_SECONDS, WarmPool, failure

BASE_DIR = "/home/user/.palaestra"
KILLED_EXIT = 128 + 9  # what the shell reports for a program killed by SIGKILL
RESTART_NOTICE = "[the interpreter was restarted; earlier variables are gone]\n"


def _e2b_sdk() -> Any:
    try:
        import e2b_code_interpreter
    except ImportError as exc:
        raise ImportError(
            "E2BSandbox needs the E2B code interpreter SDK: pip install 'palaestra[e2b]'"
        ) from exc
    return e2b_code_interpreter


def resolve_api_key(explicit: str | None = None) -> str:
    """The E2B API key: ``explicit``, else ``E2B_API_KEY``; a clear error when there is none."""
    key = explicit or os.environ.get("E2B_API_KEY")
    if not key:
        raise RuntimeError(
            "E2B_API_KEY is not set: create a key in the E2B dashboard and export "
            "E2B_API_KEY=..., pass api_key=, or use the local or docker sandbox backend"
        )
    return key


def run_command(run_dir: str, limits: Mapping[str, int], timeout: float) -> str:
    """The bash command of one run: rlimits, a kill at ``timeout``, the program and its stdin.

    The process limit counts every process of the sandbox user, so it is set to the ones
    already running plus ``max_processes``.
    """
    work = shlex.quote(f"{run_dir}/work")
    return (
        'n=0; for p in /proc/[0-9]*; do [ -O "$p" ] && n=$((n+1)); done; '
        f"cd {work} && ulimit -c 0 -v {limits['memory_mb'] << 10} "
        f"-f {limits['max_file_mb'] << 10} -n {limits['max_open_files']} "
        f"-t {limits['cpu_seconds']} -u $((n + {limits['max_processes']})) && "
        f"PYTHONPATH={work} exec timeout --signal=KILL {timeout:g}s "
        f"python3 -B {shlex.quote(run_dir + '/program.py')} < {shlex.quote(run_dir + '/stdin')}"
    )


class _CappedText:
    """Collects streamed text up to ``cap`` characters and notes what was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False

    def add(self, text: str) -> None:
        room = self.cap - self.size
        if len(text) > room:
            self.truncated = True
            text = text[: max(room, 0)]
        self.parts.append(text)
        self.size += len(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class E2BSandbox(SandboxBase):
    """Run untrusted Python in E2B cloud sandboxes.

    ``pool_size`` E2B sandboxes are created on demand (or by :meth:`warm`) and reused for
    runs; each run gets its own directory, deleted afterwards. ``template`` is an E2B
    template with ``python3`` (default: the code interpreter's). ``lifetime`` (seconds)
    is how long E2B keeps an idle sandbox before killing it.

    Example::

        with E2BSandbox() as sandbox:
            assert sandbox.run("print(6 * 7)").stdout == "42\\n"
    """

    def __init__(
        self,
        *,
        pool_size: int = 2,
        limits: Limits | None = None,
        template: str | None = None,
        api_key: str | None = None,
        allow_internet: bool = False,
        lifetime: int = 3600,
    ) -> None:
        if lifetime < 60:
            raise ValueError(f"lifetime must be >= 60 seconds, got {lifetime}")
        self._sdk = _e2b_sdk()
        self._api_key = resolve_api_key(api_key)
        self.limits = limits or Limits()
        self.pool_size = pool_size
        self._create_options = {
            "template": template,
            "timeout": lifetime,
            "allow_internet_access": allow_internet,
            "api_key": self._api_key,
        }
        self._pool: WarmPool[Any] = WarmPool(
            pool_size, self._create, self._kill, owner=type(self).__name__
        )

    def _create(self) -> Any:
        return self._sdk.Sandbox.create(**self._create_options)

    @staticmethod
    def _kill(box: Any) -> None:
        with contextlib.suppress(Exception):  # already gone at E2B's end
            box.kill()

    def warm(self, count: int | None = None) -> None:
        """Create ``count`` E2B sandboxes now (default: the whole pool)."""
        self._pool.warm(count)

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
        """Run ``code`` as ``__main__`` in a fresh directory (``files`` in it, on ``sys.path``)."""
        checked = check_run_arguments(timeout, files)
        limits = run_limits(self.limits, timeout, memory_mb, max_output_bytes)
        run_dir = f"{BASE_DIR}/run-{uuid.uuid4().hex}"
        box = self._pool.acquire()
        started = time.monotonic()
        try:
            box.files.make_dir(f"{run_dir}/work")
            box.files.write_files(
                [
                    {"path": f"{run_dir}/program.py", "data": code},
                    {"path": f"{run_dir}/stdin", "data": stdin},
                    *(
                        {"path": f"{run_dir}/work/{name}", "data": text}
                        for name, text in checked.items()
                    ),
                ]
            )
            started = time.monotonic()
            result = self._execute(box, run_dir, limits, timeout, started)
        except self._sdk.SandboxException as exc:
            self._pool.release(box, healthy=False)
            return failure(f"E2B sandbox error: {exc}", started)
        healthy = False
        try:
            box.commands.run(f"rm -rf {shlex.quote(run_dir)}", timeout=30)
            healthy = not result.timed_out
        except self._sdk.SandboxException:
            healthy = False  # a directory left behind: do not reuse this E2B sandbox
        finally:
            self._pool.release(box, healthy)
        return result

    def _execute(
        self, box: Any, run_dir: str, limits: Mapping[str, int], timeout: float, started: float
    ) -> ExecResult:
        stdout, stderr = (_CappedText(limits["max_output_bytes"]) for _ in range(2))
        exit_code, host_timeout = 0, False
        try:
            box.commands.run(
                run_command(run_dir, limits, timeout),
                on_stdout=stdout.add,
                on_stderr=stderr.add,
                timeout=timeout + HOST_GRACE_SECONDS,
                retain_output=False,
            )
        except self._sdk.CommandExitException as exc:
            exit_code = exc.exit_code
        except self._sdk.TimeoutException:
            host_timeout = True
        duration = time.monotonic() - started
        timed_out = host_timeout or (exit_code == KILLED_EXIT and duration >= timeout)
        return ExecResult(
            stdout=stdout.text,
            stderr=stderr.text,
            exit_code=-9 if timed_out else exit_code,
            timed_out=timed_out,
            memory_exceeded=ended_by_memory_error(exit_code, stderr.text),
            duration=duration,
            truncated=stdout.truncated or stderr.truncated,
        )

    def session(self) -> E2BSession:
        """A stateful interpreter (a code interpreter context) in its own directory."""
        return E2BSession(self)

    def close(self) -> None:
        """Kill the idle E2B sandboxes; runs in flight finish first."""
        self._pool.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> E2BSandbox:
        """A sandbox is a shared service: copies of an env keep using the same pool."""
        return self


class E2BSession(SessionBase):
    """A code interpreter context kept across turns; holds one pooled E2B sandbox while open.

    A cell that times out restarts the context (its state is lost); the next call's stderr
    starts with a notice saying so. Memory is bounded by the E2B sandbox, not per cell.
    """

    def __init__(self, sandbox: E2BSandbox) -> None:
        self._sandbox = sandbox
        self._box: Any = None
        self._context: Any = None
        self._restarted = False
        self._lock = threading.Lock()

    def _start(self) -> None:
        self._box = self._sandbox._pool.acquire(overflow=True)
        cwd = f"{BASE_DIR}/session-{uuid.uuid4().hex}"
        self._box.files.make_dir(cwd)
        self._context = self._box.create_code_context(cwd=cwd)

    def run(self, code: str, *, timeout: float = 5.0) -> ExecResult:
        """Run a cell; its variables, imports and files stay for the next call."""
        check_run_arguments(timeout, None)
        sdk, cap = self._sandbox._sdk, self._sandbox.limits.max_output_bytes
        started = time.monotonic()
        with self._lock:
            try:
                if self._box is None:
                    self._start()
                execution = self._box.run_code(code, context=self._context, timeout=timeout)
            except sdk.TimeoutException:
                self._box.restart_code_context(self._context)
                notice, self._restarted = self._take_notice(), True
                duration = time.monotonic() - started
                return ExecResult("", notice, exit_code=-9, timed_out=True, duration=duration)
            except sdk.SandboxException as exc:
                self._end(healthy=False)
                return failure(f"E2B sandbox error: {exc}", started)
            stdout = "".join(execution.logs.stdout)
            stderr = self._take_notice() + "".join(execution.logs.stderr)
            error = execution.error
            if error is not None:
                stderr += (
                    error.traceback if error.traceback.endswith("\n") else error.traceback + "\n"
                )
            return ExecResult(
                stdout=stdout[:cap],
                stderr=stderr[:cap],
                exit_code=1 if error is not None else 0,
                memory_exceeded=error is not None and error.name == "MemoryError",
                duration=time.monotonic() - started,
                truncated=len(stdout) > cap or len(stderr) > cap,
            )

    def _take_notice(self) -> str:
        notice, self._restarted = (RESTART_NOTICE if self._restarted else ""), False
        return notice

    def _end(self, healthy: bool) -> None:
        if self._box is not None:
            self._sandbox._pool.release(self._box, healthy)
            self._box, self._context = None, None

    def close(self) -> None:
        """End the session: the context and its directory are deleted."""
        with self._lock:
            if self._box is None:
                return
            healthy = True
            try:
                self._box.remove_code_context(self._context)
                self._box.commands.run(f"rm -rf {shlex.quote(self._context.cwd)}", timeout=30)
            except self._sandbox._sdk.SandboxException:
                healthy = False
            self._end(healthy)
