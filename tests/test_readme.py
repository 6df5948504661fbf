"""README.md stays true: its set-up lines are what CI runs and the ids it names exist."""

import re
from pathlib import Path

import palaestra

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(first_block) == 2, "README starts with exactly two set-up command lines"
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert first_block[1] in ci_script


def test_readme_env_ids_exist():
    named = set(re.findall(r"`((?:[a-z]+):[A-Za-z0-9-]+-v\d+)`", README))
    named |= set(re.findall(r"(?:show|play) ([a-z]+:[A-Za-z0-9-]+-v\d+)", README))
    assert named
    missing = {env_id for env_id in named if not _registered(env_id)}
    assert not missing, missing


def _registered(env_id: str) -> bool:
    """Whether ``env_id`` is registered; ids of a lazy family (``textarena:``) count where
    the family's package is not installed."""
    try:
        palaestra.spec(env_id)
    except palaestra.UnknownEnvError as exc:
        return "need a package that is not installed" in str(exc)
    return True
