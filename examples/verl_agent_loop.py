"""verl: palaestra envs in verl's agent loop, token-exact, multi-turn.

This script does not train: verl's trainer needs a GPU stack (CUDA vLLM or SGLang, ray,
FSDP/Megatron). It plays rows through the loop's body with a binary-search stand-in for the
model and prints what verl would receive; a GPU run is the command below.

``palaestra.integrations.verl`` registers agent loop ``"palaestra"`` in verl (when verl is
installed); rows from ``task_rows`` select it and name the env and seed. In a verl run::

    python -c "from palaestra.integrations.export import write_rows; \\
      from palaestra.integrations.verl import task_rows; \\
      write_rows(task_rows('game:GuessTheNumber-v0', range(4096)), 'train.parquet')"
    python -m verl.trainer.main_ppo data.train_files=train.parquet \\
      actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.multi_turn.enable=true \\
      actor_rollout_ref.rollout.agent.agent_loop_config_path=agent_loops.yaml ...
    # agent_loops.yaml: - name: palaestra
    #                     _target_: palaestra.integrations.verl.PalaestraAgentLoop

The loop's body is ``play_row`` (all ``PalaestraAgentLoop.run`` adds is reading verl's
config); the stand-in for verl's server manager answers as verl's does (a ``TokenOutput``
with token ids and logprobs).

    python examples/verl_agent_loop.py
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from palaestra.integrations.trajectory import EpisodeRunner, TokenTrajectory
from palaestra.integrations.verl import play_row, task_rows
from palaestra.trainers import tiny

ENV_ID = "game:GuessTheNumber-v0"


@dataclass
class TokenOutput:
    """What verl's ``LLMServerClient.generate`` returns (the fields the loop reads)."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    stop_reason: str | None = "completed"


@dataclass
class BinarySearchServer:
    """Stands in for verl's server manager: reads the chat so far, answers by binary search."""

    tokenizer: Any
    requests: list[str] = field(default_factory=list)

    async def generate(
        self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> TokenOutput:
        self.requests.append(request_id)
        text = self.tokenizer.decode(prompt_ids)
        low, high = map(int, re.search(r"between (\d+) and (\d+)", text).groups())
        for guess, hint in re.findall(
            r"boxed\{(\d+)\}<\|im_end\|>\n<\|im_start\|>user\n[^<]*?(higher|lower)", text
        ):
            low, high = (int(guess) + 1, high) if hint == "higher" else (low, int(guess) - 1)
        ids = self.tokenizer.encode(rf"\boxed{{{(low + high) // 2}}}<|im_end|>")
        return TokenOutput(ids, [-0.5] * len(ids))


def play_rows(seeds: range = range(4)) -> list[TokenTrajectory]:
    """Each row's episode as verl's ``AgentLoopOutput`` fields."""
    env_texts = [row["prompt"][-1]["content"] for row in task_rows(ENV_ID, range(2))]
    tokenizer = tiny.train_tokenizer(env_texts, vocab_size=320)
    server = BinarySearchServer(tokenizer)

    runner = EpisodeRunner(tokenizer, max_response_tokens=1024)  # rollout.response_length

    async def play_all() -> list[TokenTrajectory]:
        rows = task_rows(ENV_ID, seeds)
        return [
            await play_row(runner, server, {"temperature": 1.0}, row["extra_info"]) for row in rows
        ]

    return asyncio.run(play_all())


def main() -> None:
    for seed, t in enumerate(play_rows()):
        print(
            f"seed {seed}: prompt {len(t.prompt_ids)} tokens, response {len(t.response_ids)} "
            f"({sum(t.response_mask)} generated, {len(t.response_mask) - sum(t.response_mask)} env), "
            f"turns {t.num_turns}, reward_score {t.reward}"
        )


if __name__ == "__main__":
    main()
