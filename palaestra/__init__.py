"""palaestra: multi-turn text environments with verifiable rewards for LLM agents.

>>> import palaestra
>>> env = palaestra.make("game:GuessTheNumber-v0")
>>> obs, info = env.reset(seed=0)
"""

from palaestra import envs as _builtin_envs  # noqa: F401  (registers the built-in env ids)
from palaestra import integrations as _integrations  # noqa: F401  (lazy `gem:` ids)
from palaestra.core import (
    Env,
    EnvSpec,
    Episode,
    Turn,
    UnknownEnvError,
    list_envs,
    load_plugins,
    make,
    register,
    spec,
)

__version__ = "0.1.0"

__all__ = [
    "Env",
    "EnvSpec",
    "Episode",
    "Turn",
    "UnknownEnvError",
    "__version__",
    "list_envs",
    "load_plugins",
    "make",
    "register",
    "spec",
]
