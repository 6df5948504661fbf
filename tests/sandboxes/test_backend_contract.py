"""The same behaviour and security assertions for every backend that exists here.

The local backend always runs; docker and e2b run when an engine / a key exists and skip
with the reason otherwise (``bash .ci/docker-engine`` gives this machine an engine and an
offline image; ``$PALAESTRA_DOCKER_IMAGE`` names the image).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from palaestra.sandboxes import Limits, Sandbox, SandboxSession, make_sandbox

LIMITS = Limits(memory_mb=256, max_processes=32)


def start_backend(name: str) -> Sandbox:
    """A sandbox of backend ``name``, or a skip saying what is missing."""
    if name == "e2b" and not os.environ.get("E2B_API_KEY"):
        pytest.skip("E2B_API_KEY is not set")
    try:
        return make_sandbox(name, pool_size=2, limits=LIMITS)
    except ImportError as exc:
        pytest.skip(f"the {name} SDK is not installed: {exc}")
    except RuntimeError as exc:
        if name == "docker":
            pytest.skip(str(exc) if str(exc).startswith("no Docker engine") else f"docker: {exc}")
        raise


DOCKER = pytest.param("docker", marks=pytest.mark.docker)


@pytest.fixture(scope="module", params=["local", DOCKER, "e2b"])
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = start_backend(request.param)
    with box:
        yield box


@pytest.fixture(scope="module", params=[DOCKER, "e2b"])
def remote_backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = start_backend(request.param)
    with box:
        yield box


def test_satisfies_the_protocols(backend: Sandbox) -> None:
    assert isinstance(backend, Sandbox)
    with backend.session() as session:
        assert isinstance(session, SandboxSession)


def test_output_and_exit_code(backend: Sandbox) -> None:
    result = backend.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.ok and not result.timed_out


def test_exception_is_a_result(backend: Sandbox) -> None:
    result = backend.run("x = 1\nraise ValueError('bad value')")
    assert result.exit_code == 1 and "ValueError: bad value" in result.stderr


def test_code_compiles_as_plain_python_would(backend: Sandbox) -> None:
    """No compiler flag of the sandbox's own code (``from __future__ import annotations``)
    reaches the run: an annotation naming an undefined name fails as it does in python."""
    result = backend.run("def f(x: List[int]) -> None:\n    pass")
    assert result.exit_code == 1 and "NameError: name 'List' is not defined" in result.stderr


def test_files_and_stdin(backend: Sandbox) -> None:
    files = {"solution.py": "def add(a, b):\n    return a + b\n", "data/n.txt": "40"}
    code = "from solution import add\nprint(add(int(open('data/n.txt').read()), int(input())))"
    assert backend.run(code, files=files, stdin="2\n").stdout == "42\n"


def test_runs_do_not_see_each_other(backend: Sandbox) -> None:
    backend.run("open('left.txt', 'w').write('x')")
    assert backend.run("import os\nprint(os.listdir('.'))").stdout == "[]\n"


def test_bad_arguments_raise(backend: Sandbox) -> None:
    with pytest.raises(ValueError, match="timeout must be > 0"):
        backend.run("pass", timeout=0)
    with pytest.raises(ValueError, match="relative path"):
        backend.run("pass", files={"/etc/passwd": ""})


def test_infinite_loop_times_out_and_the_backend_recovers(backend: Sandbox) -> None:
    result = backend.run("while True:\n    pass", timeout=1.0)
    assert result.timed_out and not result.ok and result.duration < 15
    assert backend.run("print('alive')").stdout == "alive\n"


def test_memory_bomb_is_reported(backend: Sandbox) -> None:
    result = backend.run("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))")
    assert result.memory_exceeded and result.exit_code != 0


def test_fork_bomb_is_contained(backend: Sandbox) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    assert backend.run(code, timeout=1.0).timed_out
    assert backend.run("print('alive')").stdout == "alive\n"


def test_huge_output_is_capped(backend: Sandbox) -> None:
    result = backend.run("import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 10**6)")
    assert result.truncated and len(result.stdout) == LIMITS.max_output_bytes


def test_secrets_of_the_caller_are_not_visible(
    backend: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALAESTRA_TEST_SECRET", "hunter2-do-not-leak")
    result = backend.run("import os\nprint(dict(os.environ))")
    assert "hunter2" not in result.stdout and result.ok


def test_session_keeps_state_and_recovers_from_a_timeout(backend: Sandbox) -> None:
    with backend.session() as session:
        assert session.run("x = 21").ok
        assert session.run("print(x * 2)").stdout == "42\n"
        assert "NameError" in session.run("print(y)").stderr
        assert session.run("while True: pass", timeout=1.0).timed_out
        after = session.run("print('x' in globals())")
        assert after.stdout == "False\n" and "restarted" in after.stderr


def test_no_network(remote_backend: Sandbox) -> None:
    code = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)\nprint('connected')"
    result = remote_backend.run(code, timeout=8)
    assert "connected" not in result.stdout and result.exit_code == 1


def test_system_directories_are_read_only(remote_backend: Sandbox) -> None:
    result = remote_backend.run("open('/usr/lib/escaped.txt', 'w').write('owned')")
    assert result.exit_code == 1
    assert "PermissionError" in result.stderr or "Read-only file system" in result.stderr
