"""The default backend: confined local processes, each handed its run ready-made.

Each run executes in a process forked from a warm interpreter *before* the run arrives and
already confined, so a run is a hand-off (no interpreter start-up, no set-up on the
critical path) and starts in a process that never ran other code. The confinement, strongest
first (``isolation_report()`` says what is active and what is missing):

* user, network, PID, mount, IPC and UTS namespaces: no network, a minimal read-only view
  of the system and the Python installation, a fresh size- and inode-limited tmpfs as the
  work dir and ``/tmp``, no host sockets, IPC objects or processes in sight; every process
  the code starts dies with the run;
* a memory, pids and CPU cgroup per run (cgroup v1 as root, cgroup v2 where delegated:
  ``palaestra/sandboxes/_cgroups.py``), a fresh session keyring;
* Landlock (Linux >= 5.13): reads and writes only where allowed, no TCP (ABI >= 4), no
  signals or abstract sockets outside (ABI >= 6);
* a seccomp filter denying dangerous system calls (``palaestra/sandboxes/_confine.py``);
* always: rlimits, no capabilities (the bounding set too), an allow-listed environment,
  capped output, and a result the worker observed (the kernel's exit status or signal, OOM kills), never one
  the code wrote.

On a root host the code runs as an unprivileged uid of the worker's own (``sandbox`` in its
user namespace), so neither root's files nor root's per-user kernel budgets are the code's;
without a mount namespace that needs the Python installation to be readable by that uid,
and the code runs as root otherwise (``isolation_report()["user"]`` is then missing). As
root without a mount namespace or Landlock the sandbox refuses to start unless
``allow_unconfined_root=True``.
"""

from __future__ import annotations

import contextlib
import functools
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

from palaestra.sandboxes._cgroups import remove_cgroup
from palaestra.sandboxes._plumbing import frame
from palaestra.sandboxes._sources import task_source_entries
from palaestra.sandboxes.base import Limits
from palaestra.sandboxes.pool import FramedWorker, WorkerPoolSandbox

WORKER_MODULES = (
    *("_plumbing", "_confine", "_cgroups", "_view"),  # mechanisms and helpers
    *("_runner", "_spawner", "_monitor", "_setup", "_worker"),  # one process role each
)
"""The worker's modules, in import order."""

WORKER_LOADER = """import json, os, struct, sys, types
def read(size):
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            raise SystemExit(1)
        data += chunk
    return data
bundle = json.loads(read(struct.unpack(">I", read(4))[0]))
for name, source in bundle["modules"]:
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source, name + ".py", "exec"), module.__dict__)
sys.modules["_worker"].worker_main(bundle["config"])
"""
"""``python -I -B -c WORKER_LOADER`` reads the worker's modules and configuration as its first
message on stdin (:func:`worker_bundle`), so its command line names no path of the host."""


def worker_bundle(config: dict[str, Any]) -> bytes:
    """The first message to a worker: its modules' sources and ``config``, framed."""
    folder = Path(__file__).parent
    modules = [(name, (folder / f"{name}.py").read_text()) for name in WORKER_MODULES]
    return frame({"modules": modules, "config": config})


TASK_SOURCES_PROGRAM = (
    "import json, sys\n"
    "namespace = {'__name__': '_sources'}\n"
    "exec(sys.stdin.read(), namespace)\n"
    "print(json.dumps(sorted(namespace['task_source_entries']())))\n"
)


@functools.cache
def task_sources_of(python: str) -> tuple[str, ...]:
    """What the view hides of ``python``'s site-packages as task sources
    (``palaestra/sandboxes/_sources.py``), found once per interpreter: this one in process,
    another by running the module with it."""
    if python == sys.executable:
        return tuple(sorted(task_source_entries()))
    found = subprocess.run(
        [python, "-I", "-c", TASK_SOURCES_PROGRAM],
        input=(Path(__file__).parent / "_sources.py").read_text(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return tuple(json.loads(found.stdout))


def safe_environment(
    extra: Mapping[str, str] | None = None, *, python: str | None = None
) -> dict[str, str]:
    """The only environment sandboxed code sees: an allow-list, never the caller's secrets.

    ``PATH`` starts with the directory of ``python`` (default: this interpreter).
    """
    env = {
        "PATH": f"{Path(python or sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
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

    def __init__(self, config: dict[str, Any], env: dict[str, str], python: str) -> None:
        self.process = subprocess.Popen(
            [python, "-I", "-B", "-c", WORKER_LOADER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
        self._write(worker_bundle(config))
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

    def _remove_cgroups(self) -> None:
        """Kill what is left in the worker's cgroups and remove them (after a hard kill)."""
        for parent in self.report.get("cgroups", []):
            runs = (
                [e.path for e in os.scandir(parent) if e.is_dir()] if os.path.isdir(parent) else []
            )
            for path in [*runs, parent]:
                with (
                    contextlib.suppress(OSError),
                    open(os.path.join(path, "cgroup.procs")) as procs,
                ):
                    for pid in procs.read().split():
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), signal.SIGKILL)
                with contextlib.suppress(OSError):
                    remove_cgroup(path)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._close_pipes()
        self._remove_cgroups()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()
        self._remove_cgroups()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class LocalSandbox(WorkerPoolSandbox):
    """Run untrusted Python locally, confined, from a warm pool of interpreters.

    ``pool_size`` interpreters are started on demand (or all at once by :meth:`warm`) and
    reused; up to ``pool_size`` runs proceed in parallel, more wait for a free one.
    ``namespaces``, ``mount``, ``landlock``, ``seccomp``, ``cgroups``: None uses the
    mechanism where the OS allows it, True requires it (start-up fails otherwise), False
    turns it off (``mount`` needs ``namespaces``). ``allow_unconfined_root`` lets root run
    code without any filesystem isolation (no mount namespace and no Landlock).
    ``preload`` names modules the interpreters import once, so code that imports them pays
    nothing (e.g. ``("numpy",)``). ``readable_paths`` adds files or directories the code may
    read (only the system, this Python's standard library and site-packages are readable
    otherwise; an editable checkout is not); ``hidden_paths`` hides more of them (what
    envs generate tasks and grade from always is: :func:`task_sources_of`);
    ``env`` adds variables to the allow-listed environment. ``python`` is the interpreter
    the code runs with (default: this one), from wherever it is installed.

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
        mount: bool | None = None,
        landlock: bool | None = None,
        seccomp: bool | None = None,
        cgroups: bool | None = None,
        allow_unconfined_root: bool = False,
        preload: tuple[str, ...] = (),
        readable_paths: tuple[str, ...] = (),
        hidden_paths: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        python: str | None = None,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeError(
                f"LocalSandbox needs Linux (this is {sys.platform}); use the docker backend "
                "(`pip install 'palaestra[docker]'`, DockerSandbox) on other systems"
            )
        super().__init__(
            pool_size=pool_size or max(2, os.cpu_count() or 2),
            limits=limits,
            env=safe_environment(env, python=python),
        )
        self._python = python or sys.executable
        self._config = {
            "namespaces": namespaces,
            "mount": mount,
            "landlock": landlock,
            "seccomp": seccomp,
            "cgroups": cgroups,
            "allow_unconfined_root": allow_unconfined_root,
            "preload": list(preload),
            "readable": [str(path) for path in readable_paths],
            "hidden": [str(path) for path in hidden_paths],
            "task_sources": list(task_sources_of(self._python)),
            "limits": dict(self.limits.__dict__),
        }

    def _start_worker(self) -> _ProcessWorker:
        return _ProcessWorker(self._config, self._env, self._python)

    def _first_worker_started(self, report: dict[str, Any]) -> None:
        exposed = [
            what
            for what, missing in (
                ("signal", not report["namespaces"] and report["landlock_abi"] < 6),
                (
                    "renice, re-pin or set limits on",
                    not report["namespaces"] and not report["seccomp"],
                ),
            )
            if missing
        ]
        if exposed:
            warnings.warn(
                "LocalSandbox: no PID namespace on this system and nothing that stands in "
                f"for it, so sandboxed code can {' and '.join(exposed)} your other "
                "processes; use a kernel with unprivileged user namespaces or the docker "
                "backend for untrusted code",
                RuntimeWarning,
                stacklevel=6,
            )

    def worker_pids(self) -> list[int]:
        """Process ids of the idle warm interpreters (for monitoring and tests)."""
        return [worker.process.pid for worker in self._pool.idle()]

    def isolation_report(self) -> dict[str, Any]:
        """What confines the code on this machine, per threat, and what is ``missing``.

        Starts a worker if none has started yet. Example (all mechanisms available)::

            {"network": "namespace", "filesystem": "mount-namespace", ..., "missing": []}
        """
        if self._report is None:
            self.warm(1)
        return describe_isolation(self._report or {})


def describe_isolation(report: dict[str, Any]) -> dict[str, Any]:
    """A worker's start-up report -> the mechanism per threat and the protections missing."""
    ns, mount, seccomp = report.get("namespaces"), report.get("mount"), report.get("seccomp")
    abi = report.get("landlock_abi", 0)
    landlock_fs = "landlock" if abi else None
    user = _user(report)
    described = {
        "network": "namespace" if ns else "landlock+seccomp" if abi >= 4 and seccomp
        else "seccomp" if seccomp else "landlock-tcp" if abi >= 4 else "audit-hook",
        "filesystem": "mount-namespace" if mount else landlock_fs,
        "file_metadata": "read-only-mounts" if mount else "seccomp" if seccomp else None,
        "host_sockets": "mount-namespace" if mount else "seccomp" if seccomp else None,
        "processes": "pid-namespace" if ns else "process-group+subreaper",
        "process_list": "pid-namespace" if mount else landlock_fs,
        "signals": "pid-namespace" if ns else "landlock" if abi >= 6 else None,
        "process_control": "pid-namespace" if ns else "seccomp" if seccomp else None,
        "capabilities": "dropped",
        "ipc": "ipc-namespace" if ns else "seccomp" if seccomp else None,
        "host_name": "uts-namespace" if ns else None,
        "keyring": "fresh-session-keyring+seccomp" if seccomp else "fresh-session-keyring",
        "syscalls": "seccomp" if seccomp else None,
        "memory": _cgroup(report, "memory") or "rlimit-per-process",
        "process_count": _cgroup(report, "pids") or ("rlimit" if user else None),
        "cpu_share": _cgroup(report, "cpu"),
        "disk_quota": "tmpfs" if mount else None,
        "user": user,
        "kernel_budgets": _budgets(report, user),
        "landlock_abi": abi,
    }  # fmt: skip
    described["missing"] = [key for key, value in described.items() if value is None]
    if described["network"] == "audit-hook":
        described["missing"].append("network")
    if described["memory"] == "rlimit-per-process":
        described["missing"].append("memory")
    return described


def _cgroup(report: dict[str, Any], controller: str) -> str | None:
    version = report.get("cgroup_versions", {}).get(controller)
    return f"cgroup-v{version}" if version else None


def _user(report: dict[str, Any]) -> str | None:
    """Who the code runs as: a uid of its own (on a root host), the caller's uid, or None
    where a root host could not give it one (it runs as root)."""
    if not report.get("host_root"):
        return "caller-uid"
    return "dedicated-uid" if report.get("run_uid") is not None else None


def _budgets(report: dict[str, Any], user: str | None) -> str | None:
    """Whose per-user kernel budgets (processes, inotify instances, pipe buffers) the runs
    use: None where they are root's."""
    if user == "dedicated-uid" and report.get("namespaces") and not report.get("own_budgets"):
        return None  # the user namespace belongs to root: its budgets are charged to root
    return user
