"""GEM both ways: palaestra envs in GEM's vector env, GEM's games and tool envs in palaestra.

This script does not train: it shows the two directions with scripted and random policies.
Every GEM id is a palaestra id, so palaestra's trainer and the adapters here (e.g.
``EnvRollout`` in ``examples/trl_grpo.py``) train on GEM's games like on any other env.

1. ``register_in_gem`` puts palaestra ids into GEM's registry; ``gem.make_vec`` then builds
   GEM's own (sync or async) vector env over them, and a binary-search policy plays
   ``game:GuessTheNumber-v0`` through GEM's API, autoreset included.
2. Every GEM id is a palaestra id (``gem:game.Mastermind-v0-easy-v0``): ``palaestra eval``
   runs GEM's games with palaestra's runner and prints the results table.
3. A GEM env wrapped in GEM's ``ToolEnvWrapper`` with its python tool plays in palaestra:
   the tool's output comes back as a tool message.

    python examples/gem_both_ways.py
"""

from __future__ import annotations

import re

import gem
from gem.tools.python_code_tool import PythonCodeTool
from gem.tools.tool_env_wrapper import ToolEnvWrapper

from palaestra.agents import RandomAgent
from palaestra.evaluation import EvalConfig, evaluate
from palaestra.integrations.gem import GemEnv, register_in_gem

GEM_GAMES = (
    "gem:game.GuessTheNumber-v0-easy-v0",
    "gem:game.Mastermind-v0-easy-v0",
    "gem:game.Minesweeper-v0-easy-v0",
)


def binary_search(observation: str, state: dict[str, int]) -> str:
    """Guess-the-number policy that reads palaestra's feedback ("higher"/"lower")."""
    if match := re.search(r"between (\d+) and (\d+)", observation):
        state["low"], state["high"] = int(match[1]), int(match[2])
    elif "higher" in observation:
        state["low"] = state["guess"] + 1
    elif "lower" in observation:
        state["high"] = state["guess"] - 1
    state["guess"] = (state["low"] + state["high"]) // 2
    return rf"\boxed{{{state['guess']}}}"


def play_in_gem_vector_env(
    num_envs: int = 4, steps: int = 30, async_mode: bool = False
) -> list[float]:
    """Returns of the episodes GEM's vector env finished in ``steps`` steps of binary search."""
    register_in_gem("game:GuessTheNumber-v0")
    vec = gem.make_vec(
        ["palaestra/game:GuessTheNumber-v0"] * num_envs, seed=0, async_mode=async_mode
    )
    observations, _ = vec.reset(seed=0)
    states: list[dict[str, int]] = [{} for _ in range(num_envs)]
    running = [0.0] * num_envs
    finished: list[float] = []
    for _ in range(steps):
        actions = [
            binary_search(obs, state) for obs, state in zip(observations, states, strict=True)
        ]
        observations, rewards, terminated, truncated, _ = vec.step(actions)
        for i in range(num_envs):
            running[i] += float(rewards[i])
            if terminated[i] or truncated[i]:  # GEM resets it in the same step (autoreset)
                finished.append(running[i])
                running[i], states[i] = 0.0, {}
    return finished


def evaluate_gem_games(episodes: int = 8) -> dict[str, float]:
    """Mean return of a random agent on GEM's games, run by palaestra's evaluator."""
    result = evaluate(RandomAgent(), EvalConfig(list(GEM_GAMES), episodes=episodes))
    return {summary.env_id: summary.mean_reward for summary in result.summaries}


def gem_tool_env_turn() -> tuple[str, str]:
    """One python tool call in a GEM tool env played through palaestra: (role, output)."""
    tool_env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[PythonCodeTool()])
    env = GemEnv(env=tool_env)
    env.reset(seed=0)
    observation, _, _, _, info = env.step("<python>print(6 * 7)</python>")
    return info["role"], observation


def main() -> None:
    returns = play_in_gem_vector_env()
    print(
        f"GEM vector env over palaestra: {len(returns)} episodes, mean return {sum(returns) / len(returns):.2f}"
    )
    for env_id, reward in evaluate_gem_games().items():
        print(f"palaestra eval, random agent, {env_id}: mean return {reward:.2f}")
    role, output = gem_tool_env_turn()
    print(f"GEM python tool through palaestra: role={role}, output={output.strip()!r}")


if __name__ == "__main__":
    main()
