"""`palaestra eval --env-server`, the trainer's `rollout.env_server`, and `palaestra serve`'s
bind rule, end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.evaluation.report import read_jsonl
from tests.openai_stub import StubServer
from tests.server.conftest import metric


def test_cli_eval_with_an_env_server(env_server, tmp_path):
    with StubServer() as model:
        args = ["eval", "game:GuessTheNumber-v0", "--agent", f"openai:stub@{model.url}"]
        args += ["-n", "4", "--env-server", env_server, "--out", str(tmp_path)]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    episodes = read_jsonl(tmp_path / "trajectories.jsonl")
    assert len(episodes) == 4 and all(e.success for e in episodes)
    assert metric(env_server, 'palaestra_requests_total{op="reset"}') == 4
    steps = metric(env_server, 'palaestra_requests_total{op="step"}')
    assert steps == sum(e.num_turns for e in episodes)


def test_cli_serve_refuses_a_public_address_without_a_token(monkeypatch):
    monkeypatch.delenv("PALAESTRA_ENV_SERVER_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "without a bearer token" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token", "s3cret"], "at least 16 printable ASCII"),
        (["--allow-kwargs", "rg:*"], "ID_OR_GLOB=NAME"),
        (["--step-executor", "fibers"], "step executor must be one of"),
        (["--max-unread-bytes", "0"], "must be >= 1"),
    ],
)
def test_cli_serve_refuses_bad_settings(monkeypatch, args, message):
    monkeypatch.delenv("PALAESTRA_ENV_SERVER_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


@pytest.mark.slow
def test_trainer_rollouts_on_an_env_server_match_local_ones(env_server, tmp_path: Path):
    pytest.importorskip("torch", reason="the trainer needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="the tiny model needs transformers")
    from palaestra.trainers import tiny
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.trainer import Trainer
    from tests.trainers.letter_env import ENV_ID, register_once

    register_once()
    tokenizer = tiny.train_tokenizer(["Write a few lowercase letters.", "Again."], vocab_size=280)

    def train_then_evaluate(run: str, env_server: str | None) -> tuple[dict, dict]:
        rollout = {"env_id": ENV_ID, "group_size": 4, "groups_per_step": 2, "max_new_tokens": 3}
        config = TrainerConfig.model_validate(
            {
                "steps": 1,
                "output_dir": str(tmp_path / run),
                "rollout": {**rollout, "env_server": env_server},
                "eval_episodes": 4,
                "log": {"console": False},
            }
        )
        trainer = Trainer(config, tiny.tiny_qwen2(len(tokenizer), seed=0), tokenizer)
        # One client serves both runners, each run on its own event loop.
        return trainer.train()[0], trainer.evaluate()

    local, served = train_then_evaluate("local", None), train_then_evaluate("served", env_server)
    assert served[0]["reward"] == local[0]["reward"]
    assert served[0]["success"] == local[0]["success"]
    assert "eval/errors" not in served[1]
    assert served[1] == local[1]
    assert metric(env_server, 'palaestra_requests_total{op="reset"}') == 8 + 4
