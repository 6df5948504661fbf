"""Bridges to other RL frameworks, one module per framework (each needs that framework's extra).

* :mod:`~palaestra.integrations.trl`: reward functions and a multi-turn ``rollout_func`` for
  TRL's ``GRPOTrainer``;
* :mod:`~palaestra.integrations.gem`: palaestra envs as GEM envs and GEM envs as palaestra
  envs (ids ``gem:...``);
* :mod:`~palaestra.integrations.textarena`: TextArena's offline single-player games as
  palaestra envs (ids ``textarena:...``);
* :mod:`~palaestra.integrations.textworld`: TextWorld quests generated locally, as
  palaestra envs (ids ``textworld:...``);
* :mod:`~palaestra.integrations.skyrl`: palaestra envs as ``skyrl-gym`` ``BaseTextEnv``s;
* :mod:`~palaestra.integrations.verl`: a verl agent loop that plays palaestra envs;
* :mod:`~palaestra.integrations.openrlhf`: OpenRLHF's agent (multi-turn) interface;
* :mod:`~palaestra.integrations.export`: episodes as JSONL/Parquet rows for SFT and RL
  trainers, and back;
* :mod:`~palaestra.integrations.trajectory`: the runner the adapters play episodes with (the
  framework's engine, its budgets kept while playing) and an episode's token sequence split
  into prompt and response, the shape every token-level trainer reads.

Importing this package imports none of those frameworks: it only tells the registry where
the ``gem:``, ``textarena:`` and ``textworld:`` ids come from (each family is registered on
its first lookup, and only where its package is installed).
"""

from palaestra.core.registry import register_lazy_family

register_lazy_family("gem", "palaestra.integrations.gem:register_gem_ids")
register_lazy_family("textarena", "palaestra.integrations.textarena:register_textarena_ids")
register_lazy_family("textworld", "palaestra.integrations.textworld:register_textworld_ids")
