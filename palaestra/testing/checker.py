"""The public env checker: the contract every palaestra env keeps (``docs/writing-envs.md``).

Plugin authors run it in their own CI::

    from palaestra.testing import check_env
    check_env("mine:Maze-v0")

It raises ``AssertionError`` naming the rule an env broke and how to keep it.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gymnasium.utils import env_checker

import palaestra
from palaestra.core.env import Env

HOSTILE_ACTIONS = (
    "",
    " ",
    "\x00",
    "\x00" * 100 + "\\boxed{1}",
    "\\boxed{",
    "\\boxed{}",
    "}" * 1000,
    "\\boxed{" * 10_000,
    "a" * (1 << 20),
    "\\boxed{" + "9" * 5000 + "}",
    "<answer>",
    "<tool_call>",
    "<tool_call>{oops</tool_call>",
    '<tool_call>{"name": "python", "arguments": "not json"}</tool_call>',
    '<tool_call>{"name": 1}</tool_call>',
    "<python>",
    "```python\n",
)
"""Actions no env may raise on: empty, NUL bytes, unclosed tags, 1 MB, malformed tool JSON."""

SEEDS = tuple(range(8))
MAX_STEPS = 1000

Transcript = list[tuple[Any, ...]]


def play(env: Env, seed: int, policy: str = "oracle", rng_seed: int = 0) -> Transcript:
    """Play one episode with the env's oracle or random actions; returns the transcript."""
    observation, _ = env.reset(seed=seed)
    transcript: Transcript = [("reset", observation)]
    rng = np.random.default_rng(rng_seed)
    act = env.oracle() if policy == "oracle" else (lambda _obs: env.random_action(rng))
    for _ in range(MAX_STEPS):
        action = act(observation)
        observation, reward, terminated, truncated, info = env.step(action)
        transcript.append((action, observation, reward, terminated, truncated, info.get("success")))
        if terminated or truncated:
            return transcript
    raise AssertionError(
        f"rule: episodes end. A {policy} episode (seed {seed}) did not end within {MAX_STEPS} "
        "steps: return terminated=True when the task is done or max_turns steps were taken"
    )


def has_oracle(env: Env) -> bool:
    """Whether the env's episodes have an oracle."""
    env.reset(seed=0)
    try:
        env.oracle()
    except NotImplementedError:
        return False
    return True


def check_gymnasium(make: Callable[[], Env]) -> None:
    """gymnasium's own checker passes without a warning (a palaestra wrapper is an env of its
    own, so gymnasium's "this env is wrapped" notice does not count)."""
    env = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        try:
            env_checker.check_env(env, skip_render_check=True)
        except (AssertionError, UserWarning, TypeError, ValueError) as exc:
            raise AssertionError(
                f"rule: gymnasium's env checker passes. It said: {exc} (reset returns "
                "(str, dict) after super().reset(seed=seed); step returns (str, float, bool, "
                "bool, dict))"
            ) from exc


def check_determinism(make: Callable[[], Env], seeds: tuple[int, ...] = SEEDS) -> None:
    """The same seed gives the same episode, also when 8 threads play at once."""
    policy = "oracle" if has_oracle(make()) else "random"

    def run(seed: int) -> Transcript:
        return play(make(), seed, policy)

    sequential = [run(seed) for seed in seeds]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(run, [*seeds, *seeds]))
    for label, replay in (
        ("replayed in 8 threads", threaded[: len(seeds)]),
        ("replayed again", threaded[len(seeds) :]),
    ):
        differing = [seed for seed, a, b in zip(seeds, sequential, replay, strict=True) if a != b]
        assert not differing, (
            f"rule: the same seed gives the same episode. Seeds {differing}, {label}, gave other "
            f"{policy} episodes: draw randomness only from self.np_random (seeded by "
            "super().reset(seed=seed)), never from the global random or numpy state, and keep "
            "no state shared between env instances"
        )
    assert len({str(t) for t in sequential}) > 1, (
        f"rule: tasks vary with the seed. Seeds {list(seeds)} gave one same episode: draw the "
        "task from self.np_random after super().reset(seed=seed)"
    )


def check_hostile_actions(
    make: Callable[[], Env], actions: tuple[str, ...] = HOSTILE_ACTIONS
) -> None:
    """Hostile actions never raise, and rewards stay inside ``reward_range``."""
    env = make()
    low, high = env.reward_range
    env.reset(seed=0)
    for action in actions:
        try:
            observation, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:
            raise AssertionError(
                f"rule: bad actions never raise. step({action[:20]!r}) raised "
                f"{type(exc).__name__}: {exc}; answer with an observation that says what was "
                "wrong, a reward inside reward_range, and count the turn"
            ) from exc
        rule = f"rule: a bad action gets a defined answer. For {action[:20]!r}"
        assert isinstance(observation, str), f"{rule} the observation is not a string"
        assert low <= reward <= high, (
            f"{rule} the reward {reward} is outside reward_range {low, high}: clamp it, or "
            "widen reward_range"
        )
        assert isinstance(terminated, bool) and isinstance(truncated, bool), (
            f"{rule} terminated/truncated are not bools (numpy bools count as not)"
        )
        assert isinstance(info, dict), f"{rule} info is not a dict"
        if terminated or truncated:
            env.reset(seed=1)


def check_async_twins(make: Callable[[], Env]) -> None:
    """``areset``/``astep`` give what ``reset``/``step`` give."""
    env_sync, env_async = make(), make()
    observation, _ = env_sync.reset(seed=5)
    rng = np.random.default_rng(0)
    actions, steps = [], []
    for _ in range(3):
        actions.append(env_sync.random_action(rng))
        steps.append(env_sync.step(actions[-1]))
        if steps[-1][2] or steps[-1][3]:
            break

    async def run_async() -> tuple[str, list]:
        first, _ = await env_async.areset(seed=5)
        return first, [await env_async.astep(action) for action in actions]

    assert asyncio.run(run_async()) == (observation, steps), (
        "rule: the async twins give what reset/step give. areset/astep on seed 5 differ: "
        "override both twins together, or neither (the defaults call reset/step)"
    )


def check_oracle(make: Callable[[], Env], seeds: tuple[int, ...] = SEEDS) -> None:
    """The oracle (if any) succeeds on every seed (unless ``env.oracle_always_wins`` is
    False) and beats random actions by 0.3 return."""
    env = make()
    if not has_oracle(env):
        return
    oracle = [play(env, seed, "oracle") for seed in seeds]
    random = [play(env, seed, "random", rng_seed=10_000 + seed) for seed in seeds]
    if env.oracle_always_wins:
        _check_oracle_wins(seeds, oracle)
    oracle_return = np.mean([sum(step[2] for step in t[1:]) for t in oracle])
    random_return = np.mean([sum(step[2] for step in t[1:]) for t in random])
    assert oracle_return >= random_return + 0.3, (
        f"rule: the oracle beats random play. Its mean return {oracle_return:.2f} does not "
        f"beat random actions' {random_return:.2f} by 0.3: make oracle() solve the task, or "
        "random_action() return a random well-formed move (not a solving one)"
    )


def _check_oracle_wins(seeds: tuple[int, ...], transcripts: list[Transcript]) -> None:
    """Every oracle episode ends with ``info["success"] is True``, or the message says why not."""
    for seed, transcript in zip(seeds, transcripts, strict=True):
        _, observation, reward, _, _, success = transcript[-1]
        if success is True:
            continue
        if success is None:
            raise AssertionError(
                f"rule: the step that ends an episode sets info['success'] (a bool). The "
                f"oracle's episode on seed {seed} ended (reward {reward:g}) without it: set "
                "info['success'] = True on the winning step and False on a losing one"
            )
        raise AssertionError(
            f"rule: the oracle wins every seed. It lost on seed {seed} (reward {reward:g}, last "
            f"observation {observation[:80]!r}): fix oracle(), or set oracle_always_wins = "
            "False if chance can defeat the best policy (the checker then asks it only to "
            "beat random play)"
        )


CHECKS = (
    check_gymnasium,
    check_determinism,
    check_hostile_actions,
    check_async_twins,
    check_oracle,
)


def check_env(env: str | Callable[[], Env], **kwargs: Any) -> None:
    """Run every check on an env id (made with ``kwargs``) or an env factory.

    >>> check_env("game:GuessTheNumber-v0")
    """
    make = (lambda: palaestra.make(env, **kwargs)) if isinstance(env, str) else env
    for check in CHECKS:
        check(make)
