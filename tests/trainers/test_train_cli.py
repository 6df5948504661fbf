"""``palaestra train``: argument errors, a run from a YAML config, --resume, the cpu-demo."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import palaestra
from palaestra.cli import app
from palaestra.trainers import cli as train_cli

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 columns whatever the terminal (CI sets COLUMNS=80): lines are counted unwrapped."""
    monkeypatch.setattr(train_cli, "Console", lambda: Console(width=200))


def test_train_needs_a_config_or_a_preset() -> None:
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2 and "give a CONFIG file or --preset" in result.output


def test_train_rejects_an_unknown_preset() -> None:
    result = runner.invoke(app, ["train", "--preset", "gpu-giant"])
    assert result.exit_code == 2 and "unknown preset 'gpu-giant'" in result.output


def test_train_reports_an_invalid_config_in_one_line(tmp_path: Path) -> None:
    path = _write_config(tmp_path, "stpes: 3\nrollout: {group_size: 0}\n")
    _fails_in_two_lines(
        ["train", str(path)],
        "stpes: unknown key (value 3)",
        "rollout.group_size: Input should be greater than 0 (value 0)",
    )


def test_train_exits_1_when_every_episode_of_a_step_errored(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    from tests.trainers.faulty_envs import ALWAYS_CRASHING_ID, register_faulty_envs

    register_faulty_envs()
    model_dir = _tiny_model_dir(tmp_path)
    path = _write_config(
        tmp_path,
        f"model: {{path: {model_dir}}}\noutput_dir: {tmp_path / 'out'}\n"
        f"rollout: {{env_id: '{ALWAYS_CRASHING_ID}', group_size: 2, groups_per_step: 1}}\n",
    )
    result = runner.invoke(app, ["train", str(path), "-q"])
    assert result.exit_code == 1, result.output
    assert "error: step 1: all 2 episodes errored, stopped: " in result.output
    assert "the env broke" in result.output
    assert not (tmp_path / "out" / "final").exists()


def _tiny_model_dir(tmp_path: Path) -> Path:
    from palaestra.trainers import tiny

    tokenizer = tiny.train_tokenizer(["Write a few lowercase letters.", "Again."], vocab_size=280)
    model_dir = tmp_path / "init"
    tiny.tiny_qwen2(len(tokenizer)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def test_train_from_a_config_then_resume(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    from palaestra.trainers.config import TrainerConfig
    from palaestra.trainers.metrics_log import read_metrics
    from tests.trainers.letter_env import ENV_ID, register_once

    register_once()
    model_dir = _tiny_model_dir(tmp_path)
    config = TrainerConfig(
        steps=2,
        model={"path": str(model_dir)},
        rollout={"env_id": ENV_ID, "group_size": 2, "groups_per_step": 2, "max_new_tokens": 2},
        advantage={"estimator": "grpo"},
    )
    out = tmp_path / "out"
    config = config.model_copy(update={"output_dir": str(out)})
    path = tmp_path / "run.yaml"
    config.to_yaml(path)

    first = runner.invoke(app, ["train", str(path), "-q"])  # output_dir from the config
    assert first.exit_code == 0, first.output
    assert "done: 2 steps" in first.output and not Path("None").exists()
    _fails_in_two_lines(
        ["train", str(path), "--resume", "--steps", "2"], "nothing is left to train"
    )
    resumed = runner.invoke(
        app, ["train", str(path), "--output-dir", str(out), "--steps", "3", "--resume", "-q"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "resumed at step 2: training steps 3-3" in resumed.output
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]
    assert (out / "checkpoints" / "step-000003").is_dir()
    assert (out / "final" / "config.json").exists()


def _earlier_run(out: Path, last_step: int) -> None:
    """What a finished run leaves: checkpoints up to ``last_step`` and a metrics record per step."""
    checkpoint = out / "checkpoints" / f"step-{last_step:06d}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "meta.json").write_text(f'{{"step": {last_step}}}')
    lines = [f'{{"step": {step}, "reward": 0.5}}\n' for step in range(last_step + 1)]
    (out / "metrics.jsonl").write_text("".join(lines))


def test_a_fresh_run_refuses_a_used_output_dir_or_clears_it_on_request(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    from palaestra.trainers.metrics_log import read_metrics
    from tests.trainers.letter_env import ENV_ID, register_once

    register_once()
    model_dir = _tiny_model_dir(tmp_path)
    out = tmp_path / "out"
    path = _write_config(
        tmp_path,
        f"model: {{path: {model_dir}}}\noutput_dir: {out}\nsteps: 1\n"
        f"rollout: {{env_id: '{ENV_ID}', group_size: 2, groups_per_step: 2, max_new_tokens: 2}}\n",
    )
    _earlier_run(out, last_step=40)  # the quick start's run, then `train ... --steps 2`
    metrics_before = (out / "metrics.jsonl").read_text()
    _fails_in_two_lines(["train", str(path)], "already holds a run", "step-000040", "--overwrite")
    assert (out / "metrics.jsonl").read_text() == metrics_before  # untouched
    _fails_in_two_lines(
        ["train", str(path), "--resume", "--steps", "3"], "at step 40", "nothing is left to train"
    )
    again = runner.invoke(app, ["train", str(path), "--overwrite"])
    assert again.exit_code == 0, again.output
    assert "cleared the earlier run" in again.output
    step_lines = [line for line in again.output.splitlines() if "step 1/1  reward" in line]
    assert len(step_lines) == 1 and "zero-adv" in step_lines[0], again.output
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000001"]
    assert (model_dir / "config.json").is_file()  # only the run's own outputs are cleared


def test_ctrl_c_ends_training_with_one_line_and_exit_130_then_resumes(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    from tests.trainers.faulty_envs import INTERRUPTING_ID, register_faulty_envs

    register_faulty_envs()
    model_dir = _tiny_model_dir(tmp_path)
    out = tmp_path / "out"
    path = _write_config(
        tmp_path,
        f"model: {{path: {model_dir}}}\noutput_dir: {out}\nsteps: 2\nsave_every: 1\n"
        f"rollout: {{env_id: '{INTERRUPTING_ID}', group_size: 2, groups_per_step: 1}}\n",
    )
    result = runner.invoke(app, ["train", str(path), "-q"])  # Ctrl-C at step 2's rollouts
    assert result.exit_code == 130, result.output
    line = (
        f"interrupted at step 1: the last checkpoint is {out / 'checkpoints' / 'step-000001'}; "
        "continue with --resume"
    )  # after the model's loading bar (stderr, mixed in here), nothing else: no traceback
    assert result.output.rstrip().endswith(line) and result.output.count("interrupted") == 1
    assert "Traceback" not in result.output and "Aborted" not in result.output
    resumed = runner.invoke(app, ["train", str(path), "-q", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resumed at step 1" in resumed.output and "done: 2 steps" in resumed.output


def _write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _fails_in_two_lines(args: list[str], *messages: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), result.output
    for message in messages:
        assert message in result.output


def test_train_fails_fast_on_an_unknown_env_id(tmp_path: Path) -> None:
    path = _write_config(tmp_path, "rollout:\n  env_id: math:Arithmetc-v0\n")
    _fails_in_two_lines(["train", str(path)], "did you mean 'math:Arithmetic-v0'")
    assert not (tmp_path / "runs").exists()


def test_train_fails_fast_on_bad_yaml(tmp_path: Path) -> None:
    path = _write_config(
        tmp_path, "steps: 3\nrollout:\n  env_id: game:Wordle-v0\n   group_size: 2\n"
    )
    _fails_in_two_lines(["train", str(path)], "not valid YAML", "line 4")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("./models/nowhere", "model.path './models/nowhere' does not exist"),
        ("", "model.path is not set"),
    ],
)
def test_train_fails_fast_on_a_missing_model(tmp_path: Path, model: str, message: str) -> None:
    text = f"model:\n  path: {model}\n" if model else ""
    _fails_in_two_lines(["train", str(_write_config(tmp_path, text))], message)


def test_train_fails_fast_without_a_checkpoint_to_resume(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    path = _write_config(tmp_path, f"model:\n  path: {model_dir}\noutput_dir: {tmp_path / 'o'}\n")
    _fails_in_two_lines(["train", str(path), "--resume"], "no checkpoint under")


def test_train_fails_fast_on_a_missing_extra(tmp_path: Path) -> None:
    from palaestra.core import deregister
    from palaestra.testing.echo import EchoEnv

    class NeedsExtra(EchoEnv):
        def __init__(self):
            raise ImportError("needs foo: pip install 'palaestra[foo]'")

    palaestra.register("test:NeedsExtra-v0", NeedsExtra)
    try:
        path = _write_config(tmp_path, "rollout:\n  env_id: test:NeedsExtra-v0\n")
        _fails_in_two_lines(["train", str(path)], "pip install 'palaestra[foo]'")
    finally:
        deregister("test:NeedsExtra-v0")


@pytest.mark.slow
def test_cpu_demo_preset_writes_metrics_plot_and_a_rerunnable_config(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    out = tmp_path / "demo"
    result = runner.invoke(
        app, ["train", "--preset", "cpu-demo", "--output-dir", str(out), "--steps", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "eval reward (held-out seeds)" in result.output
    for name in ("metrics.jsonl", "config.yaml", "init/config.json", "final/config.json"):
        assert (out / name).exists(), name
    pytest.importorskip("matplotlib", reason="the PNG plot needs matplotlib")
    assert (out / "reward_curve.png").stat().st_size > 0


def test_train_without_the_train_extra_names_it(tmp_path: Path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "palaestra.trainers.trainer", None)  # as if torch were missing
    path = _write_config(tmp_path, "steps: 1\n")
    _fails_in_two_lines(["train", str(path)], "pip install 'palaestra[train]'")


def test_step_lines_stay_whole_in_a_narrow_log_and_zero_advantage_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="training needs torch (extra 'train')")
    pytest.importorskip("transformers", reason="training needs transformers (extra 'train')")
    monkeypatch.setattr(train_cli, "Console", lambda: Console(width=40))  # a narrow log file
    model_dir = _tiny_model_dir(tmp_path)
    path = _write_config(  # 2 new tokens never write a whole guess: every reward is 0
        tmp_path,
        f"model: {{path: {model_dir}}}\noutput_dir: {tmp_path / 'out'}\nsteps: 2\n"
        "rollout: {env_id: 'game:GuessTheNumber-v0', group_size: 2, groups_per_step: 1, "
        "max_new_tokens: 2}\n",
    )
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for step in (1, 2):
        (line,) = [line for line in lines if f"step {step}/2  reward 0.000" in line]
        assert "zero-adv 1.00" in line and "update" in line  # the whole record on one line
        (warning,) = [line for line in lines if f"step {step}: every advantage" in line]
        assert "cannot change the policy" in warning
    assert "~" in next(line for line in lines if "step 1/2  reward" in line)  # time left
