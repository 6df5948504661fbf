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
    missing = named - set(palaestra.list_envs())
    assert not missing, missing
