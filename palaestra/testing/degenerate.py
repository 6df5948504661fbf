"""Degenerate strategies must not beat random play (``docs/writing-envs.md``).

A cheater plays without reading the game: a fixed cycle of moves, one move repeated,
invalid text, several guesses listed in one action or one after another, the literal
answer. :func:`check_degenerate` plays each on the same seeds as the env's
``random_action`` and fails when one earns a higher mean return than random play, beyond
the noise of the sample::

    from palaestra.testing.degenerate import check_degenerate, cycle, repeat
    check_degenerate("game:2048-v0", {"corner": cycle("down", "left", "down", "right"),
                                      "stuck": repeat("down")})
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import palaestra
from palaestra.core.env import Env

Policy = Callable[[str], str]
Cheater = Callable[[Env, str], Policy]
"""Given the env and its first observation, a policy for one episode (observation ->
action). A cheater may read the first observation (e.g. to list the candidates it names),
never the env's hidden state."""

INVALID_TEXT = "I am not sure what to do here."
MAX_STEPS = 1000


def boxed(move: str) -> str:
    return "\\boxed{" + move + "}"


def cycle(*moves: str, box: bool = True) -> Cheater:
    """Play ``moves`` in turn, over and over, whatever happens."""
    actions = [boxed(m) if box else m for m in moves]

    def cheater(env: Env, first: str) -> Policy:
        turns = iter(range(1 << 30))
        return lambda observation: actions[next(turns) % len(actions)]

    return cheater


def repeat(move: str, box: bool = True) -> Cheater:
    """Play the same move every turn."""
    return cycle(move, box=box)


def sequence(moves: Callable[[int], str]) -> Cheater:
    """Play ``moves(turn)`` on turn 0, 1, 2, ... (e.g. scan the squares in order)."""

    def cheater(env: Env, first: str) -> Policy:
        turns = iter(range(1 << 30))
        return lambda observation: moves(next(turns))

    return cheater


INVALID: Cheater = repeat(INVALID_TEXT, box=False)
"""Text that is no move."""


def returns(
    env: Env, policy_for: Callable[[str, int], Policy], seeds: Sequence[int]
) -> list[float]:
    """The return of one episode per seed; ``policy_for(first observation, seed)`` gives the
    policy of each."""
    totals = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        policy, total = policy_for(observation, seed), 0.0
        for _ in range(MAX_STEPS):
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            total += reward
            if terminated or truncated:
                break
        totals.append(total)
    return totals


def random_returns(env: Env, seeds: Sequence[int]) -> list[float]:
    """Returns of ``env.random_action`` (its rng apart from the env's seed)."""

    def policy_for(first: str, seed: int) -> Policy:
        rng = np.random.default_rng(10_000 + seed)
        return lambda observation: env.random_action(rng)

    return returns(env, policy_for, seeds)


def check_degenerate(
    env: str | Callable[[], Env],
    cheaters: Mapping[str, Cheater],
    seeds: Sequence[int] = range(60),
    z: float = 2.0,
    **kwargs: Any,
) -> dict[str, float]:
    """Assert that no cheater's mean return beats random play's by more than ``z``
    standard errors of the difference; returns every mean (``"random"`` too)."""
    make = (lambda: palaestra.make(env, **kwargs)) if isinstance(env, str) else env
    game = make()
    baseline = random_returns(game, seeds)
    means = {"random": float(np.mean(baseline))}
    for name, cheater in cheaters.items():
        got = returns(game, lambda first, seed, c=cheater: c(game, first), seeds)
        means[name] = float(np.mean(got))
        noise = z * math.sqrt((np.var(got) + np.var(baseline)) / len(seeds))
        assert means[name] <= means["random"] + noise, (
            f"the degenerate strategy {name!r} earns a mean return of {means[name]:.3f}, "
            f"above random play's {means['random']:.3f} (+{noise:.3f} for noise, "
            f"{len(seeds)} seeds)"
        )
    game.close()
    return means
