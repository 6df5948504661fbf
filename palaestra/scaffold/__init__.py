"""``palaestra new``: write a package of envs of your own, with its tests, from a template.

The package holds a multi-turn env with a system prompt, an oracle and a random baseline
(``<family>:Safe-v0``, a safe whose code is found from digit-by-digit hints), registers it on
import, exposes it to every palaestra command through the ``palaestra.envs`` entry point
once installed, and tests it with :func:`palaestra.testing.check_env`, a cheat and answers
written the way an agent writes them.

>>> write_env_package("lockgame", Path("lockgame"))  # doctest: +SKIP
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from string import Template

TEMPLATES = Path(__file__).parent / "template"
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def package_files(name: str) -> dict[str, str]:
    """Relative path -> text of every file of the package ``name`` (also its env family)."""
    if not NAME.match(name) or keyword.iskeyword(name):
        raise ValueError(
            f"invalid package name {name!r}: use lowercase letters, digits and underscores, "
            "starting with a letter (it is the Python module and the env family, e.g. 'lockgame')"
        )
    values = {"name": name, "family": name}
    layout = {
        "pyproject.toml": "pyproject.toml.tmpl",
        "README.md": "README.md.tmpl",
        f"{name}/__init__.py": "env.py.tmpl",
        f"tests/test_{name}.py": "test_env.py.tmpl",
    }
    return {
        path: Template((TEMPLATES / template).read_text(encoding="utf-8")).substitute(values)
        for path, template in layout.items()
    }


def write_env_package(name: str, directory: Path) -> list[Path]:
    """Write the package ``name`` into ``directory`` (new or empty); returns the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(
            f"{directory} already exists and is not empty: choose another --dir or remove it"
        )
    written = []
    for relative, text in package_files(name).items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
