"""SkyRL: palaestra envs as ``skyrl-gym`` ``BaseTextEnv``s, played the way SkyRL's generator does.

This script does not train: SkyRL's trainer needs a GPU stack (vLLM, ray, FSDP). It plays
the generator's env loop with each env's oracle standing in for the model and writes the
dataset rows a SkyRL run reads.

``register_skyrl_env()`` registers env class ``"palaestra"`` in skyrl-gym; ``task_rows`` makes
the dataset rows that select it (each names a palaestra env id and seed). SkyRL's generator
builds one env per row with ``skyrl_gym.make(env_class, env_config=..., extras=row)``, calls
``init(prompt)``, then ``step(completion)`` until ``done``, appending the returned messages to
the chat. This script runs that loop with the env's oracle as the policy (a stand-in for the
model) on a game and on the python-tool arithmetic env, and writes the rows as Parquet for
SkyRL's dataset loader.

    python examples/skyrl_env.py --out runs/skyrl
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import skyrl_gym

from palaestra.integrations.export import write_rows
from palaestra.integrations.skyrl import PalaestraTextEnv, register_skyrl_env, task_rows

ENV_IDS = ("game:GuessTheNumber-v0", "math:Arithmetic-Python-v0")


def generate(row: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """One episode as SkyRL's generator plays it: (the chat, the sum of step rewards)."""
    env: PalaestraTextEnv = skyrl_gym.make("palaestra", env_config={}, extras=row)
    chat, _ = env.init(row["prompt"])
    policy = env.env.oracle()  # stands in for the model
    total = 0.0
    while True:
        action = policy(chat[-1]["content"])
        output = env.step(action)
        chat += [{"role": "assistant", "content": action}, *output["observations"]]
        total += output["reward"]
        if output["done"]:
            break
    env.close()
    return chat, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/skyrl"))
    options = parser.parse_args()
    register_skyrl_env()
    options.out.mkdir(parents=True, exist_ok=True)
    for env_id in ENV_IDS:
        rows = task_rows(env_id, range(8))
        write_rows(rows, options.out / f"{env_id.replace(':', '_')}.parquet")
        returns = [generate(row)[1] for row in rows]
        print(
            f"{env_id}: oracle mean return {sum(returns) / len(returns):.2f} over {len(rows)} rows"
        )


if __name__ == "__main__":
    main()
