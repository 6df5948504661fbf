"""The sandbox protocol: run untrusted code, get an :class:`ExecResult`; sessions keep state."""

from __future__ import annotations

import asyncio
import math
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable


@dataclass(frozen=True)
class ExecResult:
    """What one execution produced.

    ``exit_code`` is the program's exit status (negative: killed by that signal, e.g. -9
    on timeout). ``memory_exceeded`` says the memory limit ended the run, on every backend
    alike: the out-of-memory killer of its cgroup killed it, or an allocation refused under
    the limit ended it with an uncaught ``MemoryError`` (:func:`ended_by_memory_error`).
    ``truncated`` says stdout or stderr went over the output cap; the text kept is the
    start of the stream.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    memory_exceeded: bool = False
    duration: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the program ran to completion with exit status 0."""
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """One line on how the run ended (for tool observations and logs)."""
        if self.timed_out:
            return f"timed out after {self.duration:.1f} s"
        if self.memory_exceeded:
            return "ran out of memory (the sandbox memory limit was exceeded)"
        if self.exit_code < 0:
            return f"killed by signal {-self.exit_code}"
        return f"exited with status {self.exit_code}"


def ended_by_memory_error(exit_code: int, stderr: str) -> bool:
    r"""Whether a run failed with an uncaught ``MemoryError`` (its traceback's last line).

    >>> ended_by_memory_error(1, "Traceback ...\nMemoryError\n")
    True
    >>> ended_by_memory_error(0, "MemoryError\n")
    False
    """
    if exit_code == 0:
        return False
    last = stderr.rstrip().rpartition("\n")[2]
    return last.startswith("MemoryError")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution.

    ``memory_mb`` bounds the whole run (all its processes) where a memory cgroup exists,
    else each process's address space. ``cpu_seconds`` bounds a run, ``session_cpu_seconds``
    a whole session. The work dir (and ``/tmp``) holds at most ``work_dir_mb`` MiB in
    ``work_dir_files`` files and directories where the sandbox has a private mount namespace.
    """

    cpu_seconds: int = 10
    memory_mb: int = 512
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    max_output_bytes: int = 64_000
    session_cpu_seconds: int = 60
    work_dir_mb: int = 256
    work_dir_files: int = 4096

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be >= 1, got {getattr(self, name)}")
        if self.memory_mb < 64:
            raise ValueError(
                f"Limits.memory_mb={self.memory_mb} is too small for a Python interpreter; use >= 64"
            )


@runtime_checkable
class SandboxSession(Protocol):
    """A stateful interpreter: variables, imports and files persist across ``run`` calls."""

    def run(self, code: str, *, timeout: float = 5.0) -> ExecResult: ...

    async def arun(self, code: str, *, timeout: float = 5.0) -> ExecResult: ...

    def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted Python code in isolation. Backends: local (default), docker, e2b."""

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        memory_mb: int | None = None,
        max_output_bytes: int | None = None,
    ) -> ExecResult: ...

    async def arun(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        memory_mb: int | None = None,
        max_output_bytes: int | None = None,
    ) -> ExecResult: ...

    def session(self) -> SandboxSession: ...

    def close(self) -> None: ...


class _ClosedOnExit:
    """Context manager support for anything with ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SandboxBase(_ClosedOnExit):
    """Shared behaviour of the backends: async twin in a thread, context manager."""

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
        raise NotImplementedError

    async def arun(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        memory_mb: int | None = None,
        max_output_bytes: int | None = None,
    ) -> ExecResult:
        """Async twin of ``run`` (the wait happens in a worker thread)."""
        return await asyncio.to_thread(
            self.run,
            code,
            stdin=stdin,
            files=files,
            timeout=timeout,
            memory_mb=memory_mb,
            max_output_bytes=max_output_bytes,
        )

    def close(self) -> None:
        """Release the backend's resources (idempotent)."""


class SessionBase(_ClosedOnExit):
    """Shared behaviour of sessions: async twin in a thread, context manager."""

    def run(self, code: str, *, timeout: float = 5.0) -> ExecResult:
        raise NotImplementedError

    async def arun(self, code: str, *, timeout: float = 5.0) -> ExecResult:
        """Async twin of ``run``."""
        return await asyncio.to_thread(self.run, code, timeout=timeout)

    def close(self) -> None:
        """End the session and delete its files (idempotent)."""


def check_run_arguments(timeout: float, files: Mapping[str, str] | None) -> dict[str, str]:
    """Validate ``timeout`` and ``files`` (relative paths inside the work dir) for any backend."""
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    checked = {}
    for name, content in (files or {}).items():
        normal = posixpath.normpath(name)
        if not name or name.startswith("/") or normal == ".." or normal.startswith("../"):
            raise ValueError(
                f"file name {name!r} must be a relative path inside the work dir, e.g. 'data/input.txt'"
            )
        if not isinstance(content, str):
            raise TypeError(f"content of file {name!r} must be str, got {type(content).__name__}")
        checked[normal] = content
    return checked


def run_limits(
    limits: Limits, timeout: float, memory_mb: int | None, max_output_bytes: int | None = None
) -> dict[str, int]:
    """The limits of one run: CPU time no longer than the timeout, ``memory_mb`` and
    ``max_output_bytes`` (the cap on each of stdout and stderr) if given."""
    chosen = dict(limits.__dict__)
    chosen["cpu_seconds"] = min(limits.cpu_seconds, math.ceil(timeout) + 1)
    if memory_mb is not None:
        chosen["memory_mb"] = Limits(memory_mb=memory_mb).memory_mb
    if max_output_bytes is not None:
        chosen["max_output_bytes"] = Limits(max_output_bytes=max_output_bytes).max_output_bytes
    return chosen
