"""Code family: HumanEval and local datasets, unit-test rewards, single- or multi-attempt.

``-Retry`` variants allow three attempts, each after the first costing 0.1, and show, after
each, the failing calls and how they failed, never a hidden test's expected value
(``-MultiTurn``, the old name, is kept as an alias). ``-Python`` variants are a code
interpreter setup (ReTool, R1-Code-Interpreter): a python tool (a sandboxed REPL per
episode) while solving, then the final reply's program is graded; tool results are
observations, so their tokens are masked out of the loss like every env message. Every
program runs in a sandbox (the shared local one unless ``sandbox=`` is given).
"""

from palaestra.core.registry import Variant, WrapperSpec, register
from palaestra.envs.base import RETRY

PYTHON_TOOL = WrapperSpec(
    "palaestra.envs.tool_env:ToolEnv", {"tools": [{"name": "python", "stateful": True}]}
)
"""The wrapper of the ``-Python`` variants: the python tool, a REPL per episode."""

_VARIANTS = {
    "Retry": RETRY,
    "MultiTurn": Variant(kwargs=RETRY, description="alias of the -Retry variant"),
    "Python": Variant(
        wrappers=(PYTHON_TOOL,),
        description="a python tool while solving; the final reply's program is graded",
    ),
}

register("code:HumanEval-v0", "palaestra.envs.code.env:HumanEval", variants=_VARIANTS)
register("code:Dataset-v0", "palaestra.envs.code.env:CodeDataset", variants=_VARIANTS)
