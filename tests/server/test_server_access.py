"""Who may use the server and what they may ask for: tokens, routes, env kwargs, errors."""

from __future__ import annotations

import json

import httpx
import pytest

from palaestra.agents.simple import PolicyAgent
from palaestra.runner import Runner, Task
from palaestra.runner.network import EnvServerClient, EnvServerError
from palaestra.server import build_server
from palaestra.server.access import KwargsAllowList
from tests.server.conftest import raw_socket, read_answers, running_server

TOKEN = "k3Jq-9vXw_2mPz8rT"


@pytest.mark.parametrize("token", [" ", "s3cret", " " * 20, "x" * 15, "é" * 16, "ab cd" * 4])
def test_weak_tokens_are_refused(token):
    with pytest.raises(ValueError, match="at least 16 printable ASCII"):
        build_server(token=token)


async def test_with_a_token_every_route_but_health_needs_it():
    with running_server(token=TOKEN) as url:
        with pytest.raises(EnvServerError, match=r"refused.*401"):
            await EnvServerClient(url, token="wrong" * 4).link()
        with pytest.raises(EnvServerError, match=r"refused.*401"):
            await EnvServerClient(url, token="").link()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for path in ("/metrics", "/docs", "/openapi.json", "/redoc", "/nowhere"):
            assert httpx.get(f"{url}{path}").status_code == 401, path
            assert httpx.get(f"{url}{path}", headers={"Authorization": TOKEN}).status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200
        for path in ("/metrics", "/docs", "/openapi.json"):
            assert httpx.get(f"{url}{path}", headers=headers).status_code == 200, path
        host = EnvServerClient(url, token=TOKEN)
        handle = host.acquire(Task("test:Echo-v0"))
        assert (await handle.areset(seed=1))[0] == "echo env, seed 1"
        await host.aclose()


def _create_error(url: str, env_id: str, kwargs: dict) -> str:
    runner = Runner(PolicyAgent(lambda obs: "x"), host=EnvServerClient(url))
    (episode,) = runner.run([Task(env_id, 0, env_kwargs=kwargs)])
    return episode.error


def test_env_kwargs_need_the_allow_list(tmp_path):
    readable = tmp_path / "secret.jsonl"
    readable.write_text(json.dumps({"question": "1+1", "answer": "2", "secret": "s3"}) + "\n")
    with running_server() as url:
        error = _create_error(url, "math:Dataset-v0", {"path": str(readable)})
        assert "takes no 'path' kwarg for 'math:Dataset-v0'" in error
        assert "--allow-kwargs 'math:Dataset-v0=path'" in error
        assert str(tmp_path) not in error
        missing = _create_error(url, "math:Dataset-v0", {"path": str(tmp_path / "none.jsonl")})
        assert missing == error.replace(str(readable), str(tmp_path / "none.jsonl"))
        assert "takes no 'size' kwarg" in _create_error(url, "rg:basic_arithmetic-v0", {"size": 9})
    allow = ["test:Echo-*=max_turns", "test:*Echo-v0=seed_offset"]
    with running_server(allow_kwargs=allow) as url:
        runner = Runner(PolicyAgent(lambda obs: "x"), host=EnvServerClient(url))
        (episode,) = runner.run([Task("test:Echo-v0", 0, env_kwargs={"max_turns": 2})])
        assert episode.error is None and episode.truncation_reason == "turn_limit"
        assert _create_error(url, "test:Echo-v0", {"seed_offset": 3}) == (
            "EnvServerError: cannot make 'test:Echo-v0': the env failed to build on the server "
            "(its log has the error)"
        )
        assert "no 'render_mode' kwarg" in _create_error(
            url, "test:Echo-v0", {"max_turns": 2, "render_mode": "ansi"}
        )


def test_errors_do_not_tell_what_exists_on_the_server(tmp_path):
    """With a path kwarg allowed, a file that exists, one that does not and a directory
    fail alike: the client learns nothing of the server's files."""
    (tmp_path / "rows.jsonl").write_text("not json\n")
    with running_server(allow_kwargs=["math:Dataset-v0=path"]) as url:
        errors = {
            _create_error(url, "math:Dataset-v0", {"path": str(tmp_path / name)})
            for name in ("rows.jsonl", "none.jsonl", "")
        }
        assert errors == {"EnvServerError: the env failed on the server (its log has the error)"}
        runner = Runner(PolicyAgent(lambda obs: "/etc/shadow"), host=EnvServerClient(url))
        (episode,) = runner.run([Task("test:LeakyError-v0", 0)])
        assert "the env failed on the server" in episode.error and "shadow" not in episode.error


async def test_unknown_and_unserved_ids_name_the_problem():
    with running_server(env_patterns=["test:*"]) as url:
        async with raw_socket(url) as ws:
            await ws.send(
                json.dumps(
                    [
                        {"id": 0, "op": "create", "session": 0, "env": "game:Wordle-v0"},
                        {"id": 1, "op": "create", "session": 1, "env": "test:Ech-v0"},
                    ]
                )
            )
            unserved, unknown = sorted(await read_answers(ws, 2), key=lambda a: a["id"])
        assert "does not serve 'game:Wordle-v0'" in unserved["error"]
        assert "did you mean 'test:Echo-v0'" in unknown["error"]


def test_allow_list_syntax():
    allow = KwargsAllowList.parse(["rg:*=size, seed", "math:Arithmetic-v0=difficulty"])
    assert allow.allowed("rg:ab-v0") == {"size", "seed"}
    assert allow.refused("math:Arithmetic-v0", {"difficulty": 1, "path": "x"}) == ["path"]
    assert allow.refused("game:Wordle-v0", {"size": 1}) == ["size"]
    for bad in ("rg:*", "=size", "rg:*="):
        with pytest.raises(ValueError, match="ID_OR_GLOB=NAME"):
            KwargsAllowList.parse([bad])
