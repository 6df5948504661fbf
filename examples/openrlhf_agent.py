"""OpenRLHF: train on palaestra envs with OpenRLHF's agent mode, token-exact.

Run as a script, this file does not train: OpenRLHF needs CUDA (DeepSpeed, vLLM). It plays a
few rows through the executor with a binary-search stand-in for the model and prints what
OpenRLHF would receive; a GPU run is the command below.

This file is itself an OpenRLHF agent file: ``--train.agent_func_path examples/openrlhf_agent.py``
makes OpenRLHF build ``AgentExecutor()`` and call its ``execute`` for every prompt. The
dataset's labels name the palaestra task::

    python examples/openrlhf_agent.py --write-dataset runs/openrlhf/train.jsonl
    ray job submit ... -- python -m openrlhf.cli.train_ppo_ray \\
        --data.prompt_dataset runs/openrlhf/train.jsonl --data.input_key prompt \\
        --data.label_key label --data.apply_chat_template \\
        --train.agent_func_path examples/openrlhf_agent.py --train.async_enable ...

The stand-in for OpenRLHF's vLLM engine answers with vLLM's ``RequestOutput`` shape.

    python examples/openrlhf_agent.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from palaestra.integrations.export import write_rows
from palaestra.integrations.openrlhf import AgentExecutor, task_rows

ENV_ID = "game:GuessTheNumber-v0"
__all__ = ["AgentExecutor"]  # what OpenRLHF loads from this file


class BinarySearchEngine:
    """Stands in for OpenRLHF's vLLM engine: ``generate(prompt_ids, sampling_params)`` returns
    a ``RequestOutput``-shaped answer (token ids, text, per-token logprob dicts)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.max_tokens: list[int] = []

    async def generate(self, prompt_ids: list[int], sampling_params: Any) -> Any:
        self.max_tokens.append(sampling_params.max_tokens)
        text = self.tokenizer.decode(prompt_ids)
        low, high = map(int, re.search(r"between (\d+) and (\d+)", text).groups())
        for guess, hint in re.findall(
            r"boxed\{(\d+)\}<\|im_end\|>\n<\|im_start\|>user\n[^<]*?(higher|lower)", text
        ):
            low, high = (int(guess) + 1, high) if hint == "higher" else (low, int(guess) - 1)
        answer = rf"\boxed{{{(low + high) // 2}}}"
        ids = self.tokenizer.encode(answer + "<|im_end|>")
        logprobs = [{token: SimpleNamespace(logprob=-0.5)} for token in ids]
        output = SimpleNamespace(
            token_ids=ids, text=answer, logprobs=logprobs, finish_reason="stop"
        )
        return SimpleNamespace(outputs=[output])


def play_rows(seeds: range = range(4), max_length: int = 2048) -> list[dict[str, Any]]:
    """``AgentExecutor.execute`` on each row, as OpenRLHF calls it."""
    from palaestra.trainers import tiny

    rows = task_rows(ENV_ID, seeds)
    tokenizer = tiny.train_tokenizer([row["prompt"][-1]["content"] for row in rows], vocab_size=320)
    engine = BinarySearchEngine(tokenizer)
    executor = AgentExecutor()
    params = SimpleNamespace(max_tokens=64, logprobs=0, temperature=1.0)

    async def run() -> list[dict[str, Any]]:
        return [
            await executor.execute(
                row["prompt"], row["label"], params, max_length, tokenizer, engine
            )
            for row in rows
        ]

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write-dataset", type=Path, help="write 4096 rows to this .jsonl/.parquet"
    )
    options = parser.parse_args()
    if options.write_dataset:
        options.write_dataset.parent.mkdir(parents=True, exist_ok=True)
        write_rows(task_rows(ENV_ID, range(4096)), options.write_dataset)
        return
    for result in play_rows():
        generated = sum(end - start for start, end in result["action_ranges"])
        print(
            f"{json.loads(result['label'])}: {len(result['observation_tokens'])} tokens, "
            f"{len(result['action_ranges'])} actions ({generated} tokens), reward {result['reward']}"
        )


if __name__ == "__main__":
    main()
