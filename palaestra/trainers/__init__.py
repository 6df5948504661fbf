"""Turn-level RL for LLM agents: advantages, filters, losses, batching and the update step.

The torch-free parts (advantage estimators, filters, config) import from here; the modules that
need torch (``losses``, ``batch``, ``update``) need the ``train`` extra:
``pip install palaestra[train]``.
"""

from palaestra.trainers.advantages import ESTIMATORS, compute_advantages, discounted_returns
from palaestra.trainers.config import TrainerConfig
from palaestra.trainers.filters import (
    apply_filters,
    apply_token_budget,
    drop_nonfinite,
    drop_stale,
    drop_uniform_groups,
    keep_accuracy_band,
)

__all__ = [
    "ESTIMATORS",
    "TrainerConfig",
    "apply_filters",
    "apply_token_budget",
    "compute_advantages",
    "discounted_returns",
    "drop_nonfinite",
    "drop_stale",
    "drop_uniform_groups",
    "keep_accuracy_band",
]
