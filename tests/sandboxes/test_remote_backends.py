"""What the docker and e2b backends do without an engine or a key: configuration, argument
checks and the errors that say what is missing (nothing here pretends a container ran)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from palaestra.envs.code.env import CodeDataset
from palaestra.sandboxes import Limits, LocalSandbox, make_sandbox, resolve_sandbox
from palaestra.sandboxes.docker import (
    WORKER_MEMORY_MB,
    container_config,
    split_stdout_frames,
    worker_config,
)
from palaestra.sandboxes.e2b import _CappedText, resolve_api_key, run_command
from palaestra.sandboxes.local import WORKER_LOADER, worker_bundle
from palaestra.tools.python import PythonTool


def test_container_config_maps_the_limits() -> None:
    limits = Limits(memory_mb=300, max_processes=20)
    config = container_config(limits, image="python:3.12-slim", cpus=0.5, work_dir_mb=64)
    assert config["network_mode"] == "none"
    assert config["read_only"] is True
    assert config["cap_drop"] == ["ALL"] and config["security_opt"] == ["no-new-privileges"]
    assert config["user"] != "root" and not config["user"].startswith("0")
    assert config["mem_limit"] == config["memswap_limit"] == f"{300 + WORKER_MEMORY_MB}m"
    assert 20 < config["pids_limit"] <= 40
    assert config["nano_cpus"] == 500_000_000
    assert config["tmpfs"] == {"/tmp": "rw,nosuid,nodev,noexec,size=64m,mode=1777"}
    assert config["image"] == "python:3.12-slim" and config["detach"] is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"cpus": 0}, "cpus must be > 0"), ({"image": ""}, "image"), ({"work_dir_mb": 0}, "work_dir")],
)
def test_container_config_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        container_config(Limits(), **kwargs)


def frame(kind: int, payload: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def test_split_stdout_frames_keeps_stdout_and_the_partial_rest() -> None:
    partial = frame(1, b"tail")[:6]
    stream = frame(1, b"he") + frame(2, b"noise") + frame(1, b"llo") + partial
    assert split_stdout_frames(stream) == (b"hello", partial)
    assert split_stdout_frames(b"") == (b"", b"")


def test_docker_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(ImportError, match=r"palaestra\[docker\]"):
        make_sandbox("docker")


def test_docker_without_an_engine_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    pytest.importorskip("docker", reason="the docker extra is not installed")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(RuntimeError, match="no Docker engine"):
        make_sandbox("docker")


def test_e2b_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "e2b_code_interpreter", None)
    with pytest.raises(ImportError, match=r"palaestra\[e2b\]"):
        make_sandbox("e2b", api_key="unused")


def test_e2b_without_a_key_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("e2b_code_interpreter", reason="the e2b extra is not installed")
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="E2B_API_KEY is not set"):
        make_sandbox("e2b")
    assert resolve_api_key("explicit") == "explicit"
    monkeypatch.setenv("E2B_API_KEY", "from-env")
    assert resolve_api_key() == "from-env"


def test_e2b_run_command_applies_the_limits_and_the_timeout() -> None:
    limits = {
        "memory_mb": 512,
        "max_file_mb": 16,
        "max_open_files": 64,
        "cpu_seconds": 3,
        "max_processes": 32,
    }
    command = run_command("/home/user/.palaestra/run-1", limits, 2.5)
    assert "ulimit -c 0 -v 524288 -f 16384 -n 64 -t 3 -u $((n + 32))" in command
    assert "timeout --signal=KILL 2.5s python3 -B /home/user/.palaestra/run-1/program.py" in command
    assert command.index("cd /home/user/.palaestra/run-1/work") < command.index("ulimit")
    assert command.endswith("< /home/user/.palaestra/run-1/stdin")
    hostile = run_command("/tmp/a b;rm -rf ~", limits, 1)
    assert "'/tmp/a b;rm -rf ~/work'" in hostile


def test_capped_text_keeps_the_start_and_flags_the_rest() -> None:
    text = _CappedText(5)
    for part in ("abc", "defg", "h"):
        text.add(part)
    assert (text.text, text.truncated) == ("abcde", True)


def test_make_sandbox_picks_backends_by_name() -> None:
    with make_sandbox("local", pool_size=1) as box:
        assert isinstance(box, LocalSandbox) and box.pool_size == 1
    with pytest.raises(ValueError, match="did you mean 'docker'"):
        make_sandbox("dokcer")


def test_envs_and_tools_take_a_backend_name() -> None:
    assert isinstance(PythonTool(sandbox="local").sandbox, LocalSandbox)
    assert PythonTool(sandbox="local").sandbox is resolve_sandbox(None)
    with pytest.raises(ValueError, match="unknown sandbox backend 'e2c'"):
        PythonTool(sandbox="e2c")
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        CodeDataset(sandbox="containers")
    box = LocalSandbox(pool_size=1)
    assert resolve_sandbox(box) is box
    box.close()


def test_the_docker_worker_starts_from_its_bundle_and_configuration() -> None:
    """What the docker backend sends into a container (the loader, then the bundle with its
    worker configuration on stdin) starts a worker; here as a local process, and as root
    with the risk accepted (in a container the worker is ``nobody``)."""
    config = {**worker_config(Limits()), "allow_unconfined_root": os.geteuid() == 0}
    worker = subprocess.run(
        [sys.executable, "-I", "-B", "-c", WORKER_LOADER],
        input=worker_bundle(config),
        capture_output=True,
        timeout=60,
        cwd="/",
    )
    hello = json.loads(worker.stdout[4:])
    assert hello.get("ready") and hello["namespaces"] is False, hello
    assert worker.returncode == 0
