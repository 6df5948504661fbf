"""Code family: HumanEval and local datasets, unit-test rewards, single- or multi-turn.

Every program runs in a sandbox (the shared local one unless ``sandbox=`` is given).
"""

from palaestra.core.registry import register

_VARIANTS = {"MultiTurn": {"max_turns": 3}}

register("code:HumanEval-v0", "palaestra.envs.code.env:HumanEval", variants=_VARIANTS)
register("code:Dataset-v0", "palaestra.envs.code.env:CodeDataset", variants=_VARIANTS)
