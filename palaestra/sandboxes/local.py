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
import os
import select
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palaestra.sandboxes.base import Limits
from palaestra.sandboxes.pool import FramedWorker, WorkerPoolSandbox

WORKER_SCRIPT = Path(__file__).with_name("_worker.py")


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


class _ProcessWorker(FramedWorker):
    """One warm interpreter process, fed through its stdin and stdout pipes."""

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
        self._handshake(deadline=time.monotonic() + 30)

    def _write(self, data: bytes) -> bool:
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def _read(self, timeout: float) -> bytes | None:
        fd = self.process.stdout.fileno()
        if not select.select([fd], [], [], timeout)[0]:
            return None
        return os.read(fd, 1 << 20)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _remove_cgroup(self) -> None:
        if self.report.get("cgroup"):
            with contextlib.suppress(OSError):
                os.rmdir(self.report["cgroup"])

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._close_pipes()
        self._remove_cgroup()

    def stop(self) -> None:
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


class LocalSandbox(WorkerPoolSandbox):
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
        super().__init__(
            pool_size=pool_size or max(2, os.cpu_count() or 2),
            limits=limits,
            env=safe_environment(env),
        )
        self._config = {
            "namespaces": namespaces,
            "landlock": landlock,
            "preload": list(preload),
            "readable": [str(path) for path in readable_paths],
            "max_processes": self.limits.max_processes,
        }

    def _start_worker(self) -> _ProcessWorker:
        return _ProcessWorker(self._config, self._env)

    def _first_worker_started(self, report: dict[str, Any]) -> None:
        if not report["namespaces"] and report["landlock_abi"] < 6:
            warnings.warn(
                "LocalSandbox: no PID namespace and no Landlock signal scoping on this "
                "system, so sandboxed code can signal your other processes; use a kernel "
                "with unprivileged user namespaces or the docker backend for untrusted code",
                RuntimeWarning,
                stacklevel=6,
            )

    def worker_pids(self) -> list[int]:
        """Process ids of the idle warm interpreters (for monitoring and tests)."""
        return [worker.process.pid for worker in self._pool.idle()]

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
