"""Math: procedural generators, local datasets, and every reasoning-gym task (``rg:*``).

Variants: ``-Easy``/``-Hard`` difficulty, ``-Retry`` (three attempts with feedback, each
after the first costing 0.1) and ``-Python`` (tool-integrated reasoning: a sandboxed python
REPL per episode, calls in the default tool-call format). Registering imports nothing heavy: reasoning-gym, math-verify and
pyarrow load when an env first needs them.
"""

from pathlib import Path

from palaestra.core.registry import Variant, WrapperSpec, register
from palaestra.envs.base import RETRY
from palaestra.envs.math.rg_tasks import RG_TASKS

SAMPLE_PATH = str(Path(__file__).parent / "data" / "sample_math.jsonl")
"""A small JSONL sample (question/answer) shipped for tests and demos."""

PYTHON_TOOL = WrapperSpec(
    "palaestra.envs.tool_env:ToolEnv", {"tools": [{"name": "python", "stateful": True}]}
)
"""The wrapper of the ``-Python`` variants: the python tool, a REPL per episode."""

_PYTHON = Variant(wrappers=(PYTHON_TOOL,))

for _name in ("Arithmetic", "Fractions", "LinearEquation", "WordProblem"):
    register(
        f"math:{_name}-v0",
        f"palaestra.envs.math.procedural:{_name}",
        variants={
            "Easy": {"difficulty": "easy"},
            "Hard": {"difficulty": "hard"},
            "Retry": RETRY,
            "Python": _PYTHON,
        },
    )

register(
    "math:Dataset-v0",
    "palaestra.envs.math.dataset:MathDataset",
    kwargs={"path": SAMPLE_PATH},
    description="Math problems from a local JSONL/JSON/Parquet file or a datasets object "
    "(path=..., dataset=..., question_field=..., answer_field=...); defaults to a shipped sample.",
    variants={"Retry": RETRY, "Python": _PYTHON},
)

for _task in RG_TASKS:
    register(
        f"rg:{_task}-v0",
        "palaestra.envs.math.reasoning_gym:ReasoningGymEnv",
        kwargs={"task": _task},
        description=f"reasoning-gym task {_task!r}, graded by its own scorer.",
        variants={"Retry": RETRY},
    )
