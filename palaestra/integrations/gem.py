"""GEM (``gem-llm``) both ways: palaestra envs as GEM envs, GEM envs as palaestra envs.

Both APIs are ``reset``/``step`` over strings, so the adapters are thin; what they add:

* :class:`PalaestraGemEnv` is a ``gem.Env`` over any palaestra env. :func:`register_in_gem`
  puts palaestra ids into GEM's registry (``palaestra/game:Wordle-v0``), so ``gem.make`` and
  GEM's own vector envs (``gem.make_vec``) drive palaestra envs unchanged. GEM has no system
  prompt, so the env's system prompt opens the first observation.
* :class:`GemEnv` is a palaestra env over any ``gem.Env`` (GEM's tool wrappers included: a
  tool result comes back with ``info["role"] == "tool"``). Every GEM id is also a palaestra
  id, ``gem:`` + the GEM id with its colon turned into a dot + ``-v0``
  (``game:Sudoku-v0-easy`` -> ``gem:game.Sudoku-v0-easy-v0``), registered on the first
  ``gem:`` lookup, so ``palaestra.make``, the runner, ``palaestra eval`` and the trainer use
  them like any other env.

GEM envs draw from Python's *global* ``random`` state (and reseed numpy's on reset).
:class:`GemEnv` gives each env a private copy of ``random``'s state
(:mod:`palaestra.integrations._private_random`), swapped in under a lock around every
call into GEM, and puts numpy's back after each reset, so the same seed gives
the same episode under any concurrency and GEM never disturbs the caller's random state.

>>> env = palaestra.make("gem:game.GuessTheNumber-v0-easy-v0")  # doctest: +SKIP
>>> gem_env = gem.make("palaestra/game:Wordle-v0")  # after register_in_gem()  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from palaestra.core.env import Env, ResetResult, StepResult
from palaestra.core.registry import list_envs, make, register
from palaestra.integrations._private_random import PrivateRandom as _PrivateRandom


def _import_gem() -> Any:
    """Import ``gem``, undoing the ``logging.basicConfig`` it calls at import time."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import gem
    except ImportError as exc:
        raise ImportError(
            "GEM envs need gem-llm: `pip install 'palaestra[gem]'` "
            "(or `pip install --no-deps gem-llm` to keep your reasoning-gym version)"
        ) from exc
    root.handlers[:] = handlers
    root.setLevel(level)
    return gem


gem = _import_gem()
import gem.envs.registration as gem_registration  # noqa: E402

PALAESTRA_PREFIX = "palaestra/"
"""Prefix of palaestra ids in GEM's registry."""


def gem_id_to_palaestra(gem_id: str) -> str:
    """``game:Sudoku-v0-easy`` -> ``gem:game.Sudoku-v0-easy-v0``."""
    return f"gem:{gem_id.replace(':', '.', 1)}-v0"


def palaestra_id_to_gem(env_id: str) -> str:
    """Inverse of :func:`gem_id_to_palaestra`."""
    family, _, rest = env_id.partition(":")
    if family != "gem" or not rest.endswith("-v0"):
        raise ValueError(
            f"{env_id!r} is not a GEM id (they look like 'gem:game.Sudoku-v0-easy-v0')"
        )
    return rest[: -len("-v0")].replace(".", ":", 1)


class GemEnv(Env):
    """A palaestra env over a GEM env: ``GemEnv("game:Sudoku-v0-easy")`` or ``GemEnv(env=...)``.

    ``kwargs`` go to ``gem.make``. ``reset(seed=None)`` draws the GEM seed from the env's own
    ``np_random``, so a seeded run stays reproducible across autoresets. GEM envs report no
    success flag; ``info["success"]`` is set when an episode ends with a reward of at least
    ``success_reward`` (GEM's games give 1.0 for a win).
    """

    threaded_step = True

    def __init__(
        self,
        gem_id: str | None = None,
        *,
        env: Any = None,
        success_reward: float = 1.0,
        reward_range: tuple[float, float] = (-1.0, 1.0),
        **kwargs: Any,
    ):
        super().__init__()
        if (gem_id is None) == (env is None):
            raise ValueError("give a GEM id or env=, not both (nor neither)")
        self._rng = _PrivateRandom()
        with self._rng.active(keep_numpy=True):
            self.gem_env = gem.make(gem_id, **kwargs) if env is None else env
        self.success_reward = success_reward
        self.reward_range = reward_range
        max_turns = getattr(self.gem_env.unwrapped, "max_turns", None)
        self.max_turns = max_turns if isinstance(max_turns, int) and max_turns > 0 else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        super().reset(seed=seed)
        gem_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else seed
        with self._rng.active(keep_numpy=True):  # GEM's reset reseeds numpy's global state
            observation, info = self.gem_env.reset(seed=gem_seed)
        return str(observation), dict(info)

    def step(self, action: str) -> StepResult:
        with self._rng.active():
            observation, reward, terminated, truncated, info = self.gem_env.step(action)
        info = dict(info)
        if "tool_type" in info:  # GEM's ToolEnvWrapper ran a tool: the observation is its output
            info["role"] = "tool"
        if terminated or truncated:
            info.setdefault("success", bool(terminated and reward >= self.success_reward))
        return str(observation), float(reward), bool(terminated), bool(truncated), info

    def random_action(self, rng: np.random.Generator) -> str:
        """GEM's ``sample_random_action``, drawing from ``rng`` (not from the episode's state).

        GEM's wrappers (``ToolEnvWrapper``, ``ObservationWrapper``) do not pass the call on,
        so it is asked of the first env down the wrapper chain that answers it: the game's
        random move is a well-formed action of the wrapped env too.
        """
        env = self.gem_env
        with _PrivateRandom(int(rng.integers(2**31 - 1))).active():
            while env is not None:
                try:
                    return str(env.sample_random_action())
                except NotImplementedError:
                    env = getattr(env, "env", None)
        return super().random_action(rng)


def register_gem_ids() -> list[str]:
    """Register every id of GEM's registry as a palaestra id (see the module docstring);
    returns the palaestra ids.

    Called on the first ``gem:`` lookup; call it again to add GEM ids registered since.
    """
    added = []
    for gem_id in list(gem_registration.ENV_REGISTRY):
        if gem_id.startswith(PALAESTRA_PREFIX):
            continue  # palaestra's own envs, registered in GEM by register_in_gem
        env_id = gem_id_to_palaestra(gem_id)
        register(
            env_id,
            GemEnv,
            kwargs={"gem_id": gem_id},
            description=f"GEM's {gem_id} (gem-llm), played through palaestra",
            override=True,
        )
        added.append(env_id)
    return added


class PalaestraGemEnv(gem.Env):
    """A ``gem.Env`` over a palaestra env (an id, with ``kwargs`` for ``palaestra.make``, or an
    env object).

    ``seed`` is the seed of the first ``reset`` if that reset gives none (``gem.make_vec``
    passes ``seed + index`` to each env); any later reset without a seed continues the env's
    random stream, also after a reset with an explicit seed. The system prompt (if any) opens the first observation, since GEM has no other
    place for it; ``include_system_prompt=False`` leaves it out.
    """

    def __init__(
        self,
        env: str | Env,
        seed: int | None = None,
        *,
        include_system_prompt: bool = True,
        **kwargs: Any,
    ):
        super().__init__()
        self.env = make(env, **kwargs) if isinstance(env, str) else env
        self._make_args = (env, kwargs, include_system_prompt)
        self._first_seed = seed
        self.include_system_prompt = include_system_prompt
        self.max_turns = self.env.max_turns
        self._action_rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if seed is None:
            seed = self._first_seed
        self._first_seed = None  # used once, and only by a first reset without a seed
        observation, info = self.env.reset(seed=seed)
        prompt = self.env.system_prompt
        if self.include_system_prompt and prompt:
            observation = f"{prompt}\n\n{observation}"
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        return self.env.random_action(self._action_rng)

    def spawn(self, same_state: bool = False, **kwargs: Any) -> PalaestraGemEnv:
        if same_state:
            raise NotImplementedError("palaestra envs do not copy their state; spawn a fresh one")
        env, make_kwargs, include = self._make_args
        if not isinstance(env, str):
            raise NotImplementedError("spawn needs an env built from an id")
        return PalaestraGemEnv(env, include_system_prompt=include, **{**make_kwargs, **kwargs})

    def close(self) -> None:
        self.env.close()


def register_in_gem(pattern: str = "*") -> list[str]:
    """Register the palaestra ids matching ``pattern`` in GEM's registry, as
    ``palaestra/<id>``; returns the GEM ids added.

    >>> register_in_gem("game:*")  # doctest: +SKIP
    >>> vec = gem.make_vec(["palaestra/game:Wordle-v0"] * 8, seed=0)  # doctest: +SKIP
    """
    added = []
    for env_id in list_envs(pattern):
        gem_id = PALAESTRA_PREFIX + env_id
        if env_id.startswith("gem:") or gem_id in gem_registration.ENV_REGISTRY:
            continue
        gem.register(gem_id, functools.partial(PalaestraGemEnv, env_id))
        added.append(gem_id)
    return added
