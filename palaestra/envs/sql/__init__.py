"""SQL: text-to-SQL with execution feedback (``sql:*``), on SQLite or DuckDB.

``sql:<Domain>-v0`` asks generated questions about a database generated from the episode's
seed (shop, school, flights, hospital, library; ``Mixed``: any of them); ``sql:Spider-v0``
reads Spider/BIRD-format files from local paths (default: a tiny shipped sample). Variants:
``-Easy``/``-Hard`` question levels, ``-Retry`` (three attempts with the execution
feedback, 0.1 off the reward for each attempt after the first), ``-Tools`` (explore with
``list_tables``/``describe_table``/``sql`` in the default tool-call format) and ``-SQLTag``
(SkyRL-SQL's shape: ``<sql>query</sql>`` explores, ``<solution>`` answers). Guide:
docs/sql.md.
"""

from palaestra.core.registry import Variant, WrapperSpec, register
from palaestra.envs.base import RETRY

TOOLS = WrapperSpec("palaestra.envs.sql.env:SQLToolEnv", {})
TAG_TOOLS = WrapperSpec("palaestra.envs.sql.env:SQLToolEnv", {"format": "tags"})
_VARIANTS = {
    "Retry": RETRY,
    "Tools": Variant(wrappers=(TOOLS,)),
    "SQLTag": Variant(wrappers=(TAG_TOOLS,)),
}

for _domain in ("Shop", "School", "Flights", "Hospital", "Library", "Mixed"):
    register(
        f"sql:{_domain}-v0",
        "palaestra.envs.sql.env:SyntheticSQL",
        kwargs={"domain": _domain.lower()},
        description=f"Text-to-SQL on the generated {_domain.lower()} database"
        + (" (any domain per episode)" if _domain == "Mixed" else "")
        + "; reward 1 when the query's result matches the gold query's.",
        variants={"Easy": {"difficulty": "easy"}, "Hard": {"difficulty": "hard"}, **_VARIANTS},
    )

register(
    "sql:Spider-v0",
    "palaestra.envs.sql.dataset:SQLDataset",
    description="Spider/BIRD-format text-to-SQL from local files (path=..., db_dir=...); "
    "defaults to a tiny shipped Spider-format sample.",
    variants=_VARIANTS,
)
