"""Code family: HumanEval and local datasets, unit-test rewards, single- or multi-attempt.

``-Retry`` variants show failing tests and allow three attempts (``-MultiTurn``, the old
name, is kept as an alias). Every program runs in a sandbox (the shared local one unless
``sandbox=`` is given).
"""

from palaestra.core.registry import Variant, register
from palaestra.envs.base import RETRY_ATTEMPTS

_RETRY = {"max_attempts": RETRY_ATTEMPTS}
_VARIANTS = {
    "Retry": _RETRY,
    "MultiTurn": Variant(kwargs=_RETRY, description="alias of the -Retry variant"),
}

register("code:HumanEval-v0", "palaestra.envs.code.env:HumanEval", variants=_VARIANTS)
register("code:Dataset-v0", "palaestra.envs.code.env:CodeDataset", variants=_VARIANTS)
