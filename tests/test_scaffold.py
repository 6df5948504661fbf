"""Envs of your own: ``palaestra new``, ``palaestra --import``, and checker messages that
name the broken rule and the fix."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import palaestra
from palaestra.cli import app
from palaestra.scaffold import package_files
from palaestra.testing.checker import check_determinism, check_hostile_actions, check_oracle
from tests.conftest import child_env

runner = CliRunner()


@pytest.fixture
def lockgame(tmp_path: Path) -> Path:
    """A fresh ``palaestra new lockgame`` package."""
    result = runner.invoke(app, ["new", "lockgame", "--dir", str(tmp_path / "lockgame")])
    assert result.exit_code == 0, result.output
    return tmp_path / "lockgame"


def _run_package_tests(package: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=package, env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_new_writes_a_package_whose_own_tests_pass(lockgame: Path):
    files = {str(p.relative_to(lockgame)) for p in lockgame.rglob("*") if p.is_file()}
    assert files == {
        "pyproject.toml",
        "README.md",
        "lockgame/__init__.py",
        "tests/test_lockgame.py",
    }
    assert 'lockgame = "lockgame"' in (lockgame / "pyproject.toml").read_text()
    done = _run_package_tests(lockgame)
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_the_package_tests_catch_an_env_that_forgets_success(lockgame: Path):
    module = lockgame / "lockgame" / "__init__.py"
    text = module.read_text()
    assert '"success": success, ' in text
    module.write_text(text.replace('"success": success, ', ""))
    done = _run_package_tests(lockgame)
    assert done.returncode == 1
    assert "the step that ends an episode sets info['success']" in done.stdout


def test_new_refuses_a_used_directory_and_a_bad_name(lockgame: Path):
    again = runner.invoke(app, ["new", "lockgame", "--dir", str(lockgame)])
    assert again.exit_code == 2 and "already exists and is not empty" in again.output
    with pytest.raises(ValueError, match="invalid package name 'Lock-Game'"):
        package_files("Lock-Game")


def test_import_makes_a_local_module_visible_to_the_commands(lockgame: Path, monkeypatch):
    monkeypatch.chdir(lockgame)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "lockgame", raising=False)
    try:
        result = runner.invoke(
            app, ["--import", "lockgame", "eval", "lockgame:*", "--agent", "oracle", "-n", "4"]
        )
        assert result.exit_code == 0, result.output
        assert "lockgame:Safe-Hard-v0" in result.output and "100%" in result.output
    finally:
        for env_id in palaestra.list_envs("lockgame:*"):
            palaestra.core.registry.deregister(env_id)


def test_import_takes_a_file_path_and_says_what_is_wrong(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = tmp_path / "myenvs_for_import.py"
    module.write_text(
        "import palaestra\n"
        "palaestra.register('impfile:Guess-v0', 'palaestra.envs.games.guess_the_number:GuessTheNumber')\n"
    )
    try:
        result = runner.invoke(app, ["-i", str(module), "list", "impfile:*"])
        assert result.exit_code == 0 and "impfile:Guess-v0" in result.output
    finally:
        palaestra.core.registry.deregister("impfile:Guess-v0")
    missing = runner.invoke(app, ["-i", "no_such_module_here", "list"])
    assert missing.exit_code == 2 and "no module 'no_such_module_here'" in missing.output
    broken = tmp_path / "broken_envs.py"
    broken.write_text("raise RuntimeError('bad registration')\n")
    failed = runner.invoke(app, ["-i", str(broken), "list"])
    assert failed.exit_code == 2
    assert "failed: RuntimeError: bad registration" in failed.output


def test_an_unknown_family_says_how_to_make_it_visible():
    result = runner.invoke(app, ["eval", "mine:Bracket-v0"])
    assert result.exit_code == 2
    assert "no env of family 'mine' is registered" in result.output
    assert "--import" in result.output and "palaestra.envs" in result.output


class _ForgetsSuccess(palaestra.Env):
    """One step; the right answer ``1`` wins reward 1 but ``info`` has no ``success``."""

    max_turns = 1

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return f"Say 1 (task {int(self.np_random.integers(1000))}).", {}

    def step(self, action):
        return "done", float(action == "1"), True, False, {}

    def oracle(self):
        return lambda observation: "1"

    def random_action(self, rng):
        return str(rng.integers(2, 9))


class _GlobalRandom(_ForgetsSuccess):
    def reset(self, *, seed=None, options=None):
        import random

        super().reset(seed=seed)
        return f"Say 1 (task {random.randint(0, 10**9)}).", {}


class _RaisesOnGarbage(_ForgetsSuccess):
    def step(self, action):
        return "done", float(int(action) == 1), True, False, {"success": action == "1"}


@pytest.mark.parametrize(
    ("env_class", "check", "rule", "fix"),
    [
        (_ForgetsSuccess, check_oracle, "sets info['success']", "True on the winning step"),
        (_GlobalRandom, check_determinism, "same seed gives the same episode", "self.np_random"),
        (_RaisesOnGarbage, check_hostile_actions, "bad actions never raise", "count the turn"),
    ],
)
def test_checker_messages_name_the_rule_and_the_fix(env_class, check, rule, fix):
    with pytest.raises(AssertionError) as error:
        check(env_class)
    assert rule in str(error.value) and fix in str(error.value)
