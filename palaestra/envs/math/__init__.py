"""Math: procedural generators, local datasets, and every reasoning-gym task (``rg:*``).

Registering imports nothing heavy: reasoning-gym, math-verify and pyarrow load when an env
first needs them.
"""

from pathlib import Path

from palaestra.core.registry import register
from palaestra.envs.math.rg_tasks import RG_TASKS

_VARIANTS = {"Easy": {"difficulty": "easy"}, "Hard": {"difficulty": "hard"}}
RETRY_ATTEMPTS = 3
SAMPLE_PATH = str(Path(__file__).parent / "data" / "sample_math.jsonl")
"""A small JSONL sample (question/answer) shipped for tests and demos."""

for _name in ("Arithmetic", "Fractions", "LinearEquation", "WordProblem"):
    register(
        f"math:{_name}-v0",
        f"palaestra.envs.math.procedural:{_name}",
        variants={**_VARIANTS, "Retry": {"max_attempts": RETRY_ATTEMPTS}},
    )

register(
    "math:Dataset-v0",
    "palaestra.envs.math.dataset:MathDataset",
    kwargs={"path": SAMPLE_PATH},
    description="Math problems from a local JSONL/Parquet file or a datasets object "
    "(path=..., dataset=..., question_field=..., answer_field=...); defaults to a shipped sample.",
)

for _task in RG_TASKS:
    register(
        f"rg:{_task}-v0",
        "palaestra.envs.math.reasoning_gym:ReasoningGymEnv",
        kwargs={"task": _task},
        description=f"reasoning-gym task {_task!r}, graded by its own scorer.",
        variants={"Retry": {"max_attempts": RETRY_ATTEMPTS}},
    )
