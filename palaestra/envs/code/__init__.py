"""Code family: HumanEval and local datasets, unit-test rewards, single- or multi-attempt.

``-Retry`` variants allow three attempts, each after the first costing 0.1, and show, after
each, the failing calls and how they failed, never a hidden test's expected value
(``-MultiTurn``, the old name, is kept as an alias). Every program runs in a sandbox (the
shared local one unless ``sandbox=`` is given).
"""

from palaestra.core.registry import Variant, register
from palaestra.envs.base import RETRY

_VARIANTS = {
    "Retry": RETRY,
    "MultiTurn": Variant(kwargs=RETRY, description="alias of the -Retry variant"),
}

register("code:HumanEval-v0", "palaestra.envs.code.env:HumanEval", variants=_VARIANTS)
register("code:Dataset-v0", "palaestra.envs.code.env:CodeDataset", variants=_VARIANTS)
