"""The docker backend: runs code in locked-down containers kept warm in a pool.

Each pooled container runs one sandbox worker (``palaestra/sandboxes/_worker.py`` and its
modules, the same program the local backend uses, sent on the worker's stdin), so a run is
a fork inside an already started container: no container start-up per call. The container
adds what a process cannot give itself:

* no network at all (``network_mode="none"``);
* a read-only root file system; the only writable place is a tmpfs at ``/tmp`` (``noexec``);
* all capabilities dropped, ``no-new-privileges``, an unprivileged user (``nobody``);
* a memory cgroup (``Limits.memory_mb`` plus room for the worker), a pids cgroup
  (``Limits.max_processes`` plus the worker's own) and a CPU quota (``cpus``).

Inside, the worker applies the rest of :class:`Limits` as rlimits, kills the run's processes
at its timeout and caps the output. A run that times out also costs its container: it is
removed and the pool starts a fresh one; a worker that stops answering, or is found dead when
taken from the pool, is removed the same way. The engine removes a container once it stops,
and a process killed before it closed its sandbox leaves containers that the next
``DockerSandbox`` on the host removes (their label names the owner's host and pid). Needs
``pip install 'palaestra[docker]'`` and a running Docker engine.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any

from palaestra.sandboxes.base import Limits
from palaestra.sandboxes.local import WORKER_LOADER, safe_environment, worker_bundle
from palaestra.sandboxes.pool import FramedWorker, WorkerPoolSandbox

DEFAULT_IMAGE = "python:3.12-slim"
IMAGE_VARIABLE = "PALAESTRA_DOCKER_IMAGE"
"""Environment variable naming the image used when none is passed (e.g. one built offline)."""
CONTAINER_PATH = "/usr/local/bin:/usr/bin:/bin"
WORK_DIR = "/tmp"
WORKER_MEMORY_MB = 64
"""Memory the worker and its spawner need beside the run itself."""
WORKER_PROCESSES = 8
"""Processes beside the run's own: the init, ``sleep``, the worker, its spawner, exec shims."""
LABEL = "palaestra.sandbox"
"""Label of every sandbox container; its value names the owner, ``<hostname>:<pid>``."""
STARTUP_SECONDS = 60.0
_STDOUT = 1


def _docker_sdk() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise ImportError(
            "DockerSandbox needs the Docker SDK for Python: pip install 'palaestra[docker]'"
        ) from exc
    return docker


def container_config(
    limits: Limits,
    *,
    image: str = DEFAULT_IMAGE,
    cpus: float = 1.0,
    work_dir_mb: int = 256,
) -> dict[str, Any]:
    """Keyword arguments of ``docker.containers.run`` for one pooled sandbox container.

    The container idles (``sleep infinity``) until a worker is started in it with ``exec``.
    """
    if not image:
        raise ValueError("image must name a Docker image with python3, e.g. 'python:3.12-slim'")
    if not cpus > 0:
        raise ValueError(f"cpus must be > 0, got {cpus}")
    if work_dir_mb < 1:
        raise ValueError(f"work_dir_mb must be >= 1, got {work_dir_mb}")
    memory = f"{limits.memory_mb + WORKER_MEMORY_MB}m"
    return {
        "image": image,
        "command": ["sleep", "infinity"],
        "detach": True,
        "init": True,
        "user": "65534:65534",
        "working_dir": WORK_DIR,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {WORK_DIR: f"rw,nosuid,nodev,noexec,size={work_dir_mb}m,mode=1777"},
        "mem_limit": memory,
        "memswap_limit": memory,  # equal to mem_limit: no swap
        "pids_limit": limits.max_processes + WORKER_PROCESSES,
        "nano_cpus": int(cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [{"name": "core", "soft": 0, "hard": 0}],
        "labels": {LABEL: owner()},
        "auto_remove": True,  # a container that stops for any reason is removed by the engine
    }


def owner() -> str:
    """This process, as the sandbox containers it starts name their owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


def remove_orphans(client: Any) -> None:
    """Remove sandbox containers whose owner, a process of this host, is gone (it was
    killed before it could close its sandbox)."""
    host = socket.gethostname()
    for container in client.api.containers(all=True, filters={"label": LABEL}):
        owner_host, _, pid = container["Labels"].get(LABEL, "").rpartition(":")
        if owner_host == host and pid.isdigit() and not _process_exists(int(pid)):
            with contextlib.suppress(Exception):  # removed meanwhile
                client.api.remove_container(container["Id"], force=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        pass
    return True


def worker_config(limits: Limits, preload: tuple[str, ...] = ()) -> dict[str, Any]:
    """The configuration of the sandbox worker in each container."""
    return {
        "namespaces": False,  # the container is the namespace, the cgroup and the mount view
        "mount": False,
        "landlock": False,
        "seccomp": None,  # on top of the engine's own profile, where the kernel allows
        "cgroups": False,
        "allow_unconfined_root": False,
        "preload": list(preload),
        "readable": [],
        "hidden": [],
        "limits": dict(limits.__dict__),
    }


def split_stdout_frames(buffer: bytes) -> tuple[bytes, bytes]:
    """Docker's multiplexed exec stream -> (stdout payload of the whole frames, the rest).

    Each frame is an 8-byte header (stream type, 3 zero bytes, big-endian length) and the
    payload; frames of other streams (stderr) are dropped.
    """
    stdout = bytearray()
    while len(buffer) >= 8:
        kind, size = buffer[0], struct.unpack(">I", buffer[4:8])[0]
        if len(buffer) < 8 + size:
            break
        if kind == _STDOUT:
            stdout += buffer[8 : 8 + size]
        buffer = buffer[8 + size :]
    return bytes(stdout), buffer


class _ContainerWorker(FramedWorker):
    """A started container and the sandbox worker running in it, fed through an exec socket."""

    def __init__(
        self,
        client: Any,
        config: dict[str, Any],
        worker_config: dict[str, Any],
        env: dict[str, str],
    ) -> None:
        self.container = client.containers.run(**config)
        self._alive = True
        self._frames = b""
        try:
            command = ["python3", "-I", "-B", "-c", WORKER_LOADER]
            exec_id = client.api.exec_create(
                self.container.id, command, stdin=True, stdout=True, stderr=False, environment=env
            )["Id"]
            stream = client.api.exec_start(exec_id, socket=True)
            self._socket: socket.socket = getattr(stream, "_sock", stream)
            self._stream = stream  # keeps the HTTP response (and a TLS socket) alive
            self._write(worker_bundle(worker_config))
            self._handshake(deadline=time.monotonic() + STARTUP_SECONDS)
        except BaseException:
            self.kill()
            raise

    def _write(self, data: bytes) -> bool:
        try:
            self._socket.sendall(data)
            return True
        except OSError:
            return False

    def _read(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            stdout, self._frames = split_stdout_frames(self._frames)
            if stdout:
                return stdout
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self._socket.settimeout(left)
                chunk = self._socket.recv(1 << 20)
            except TimeoutError:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self._alive = False
                return b""
            self._frames += chunk

    @property
    def alive(self) -> bool:
        """Running, as far as the exec socket tells: it reads end of file once the
        container or the worker is gone."""
        if self._alive and not self._frames:
            try:
                if select.select([self._socket], [], [], 0)[0]:  # readable: data or the end
                    self._alive = self._socket.recv(1, socket.MSG_PEEK) != b""
            except (OSError, ValueError):  # closed
                self._alive = False
        return self._alive

    def kill(self) -> None:
        """Remove the container: every process in it dies, its tmpfs is gone."""
        self._alive = False
        with contextlib.suppress(OSError, AttributeError):
            self._socket.close()
        with contextlib.suppress(Exception):  # already removed, or the engine went away
            self.container.remove(force=True)

    def stop(self) -> None:
        """Nothing in the container outlives it, so stopping is removing it."""
        self.kill()


class DockerSandbox(WorkerPoolSandbox):
    """Run untrusted Python in Docker containers kept warm in a pool.

    ``image`` needs ``python3`` (>= 3.11) and ``sleep``; it is pulled if missing. Without
    one, ``$PALAESTRA_DOCKER_IMAGE`` names it, else ``python:3.12-slim``
    (docs/sandboxes.md builds one offline from Debian's packages).
    ``limits`` map to container limits (memory and pids cgroups) and to rlimits inside;
    ``cpus`` is the CPU quota of each container; ``work_dir_mb`` the size of its ``/tmp``
    tmpfs. ``preload`` names modules the workers import once (they must be in the image).
    ``base_url`` points at a Docker engine (default: the environment, ``DOCKER_HOST``).

    Example::

        with DockerSandbox(pool_size=2) as sandbox:
            assert sandbox.run("print(6 * 7)").stdout == "42\\n"
    """

    replace_after_timeout = True

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int = 2,
        limits: Limits | None = None,
        cpus: float = 1.0,
        work_dir_mb: int = 256,
        preload: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(
            pool_size=pool_size,
            limits=limits,
            env=safe_environment({"PATH": CONTAINER_PATH, **(env or {})}),
        )
        if image is None:
            image = os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE
        self._container_config = container_config(
            self.limits, image=image, cpus=cpus, work_dir_mb=work_dir_mb
        )
        self._worker_config = worker_config(self.limits, preload)
        self._client = connect(base_url)
        remove_orphans(self._client)
        self._ensure_image(image)

    def _ensure_image(self, image: str) -> None:
        errors = _docker_sdk().errors
        try:
            self._client.images.get(image)
        except errors.ImageNotFound:
            try:
                self._client.images.pull(image)
            except errors.APIError as exc:
                raise RuntimeError(
                    f"Docker image {image!r} is not present and could not be pulled ({exc}); "
                    f"pull it with `docker pull {image}`, or pass image= (or set "
                    f"{IMAGE_VARIABLE}) an image you have; docs/sandboxes.md builds one offline"
                ) from exc

    def _start_worker(self) -> _ContainerWorker:
        return _ContainerWorker(
            self._client, self._container_config, self._worker_config, self._env
        )

    def _limits_for(
        self, timeout: float, memory_mb: int | None, max_output_bytes: int | None = None
    ) -> dict[str, int]:
        if memory_mb is not None and memory_mb > self.limits.memory_mb:
            raise ValueError(
                f"memory_mb={memory_mb} is above this sandbox's container limit "
                f"(Limits.memory_mb={self.limits.memory_mb}); create the DockerSandbox "
                f"with limits=Limits(memory_mb={memory_mb})"
            )
        return super()._limits_for(timeout, memory_mb, max_output_bytes)

    def close(self) -> None:
        """Remove the idle containers; runs in flight finish first."""
        super().close()
        with contextlib.suppress(Exception):
            self._client.close()


def connect(base_url: str | None = None) -> Any:
    """A Docker client that has answered a ping, or a clear error saying why there is none."""
    docker = _docker_sdk()
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError(
            f"no Docker engine: {exc}. Start Docker (or set DOCKER_HOST / base_url= to a "
            "running engine), or use the local or e2b sandbox backend"
        ) from exc
    return client
