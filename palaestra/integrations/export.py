"""Episodes as JSONL / Parquet rows in the shapes SFT and RL trainers read, and back.

Two shapes, one row per episode (errored episodes are left out):

* :func:`sft_rows`: ``messages`` in the OpenAI chat form (assistant ``tool_calls`` with ids,
  ``tool`` messages with ``tool_call_id``), ending with the last assistant message, the
  shape TRL's ``SFTTrainer``, OpenRLHF's SFT and most chat fine-tuning tools read; plus the
  env id, seed, return and success, to filter on (e.g. keep successful episodes only);
* :func:`rl_rows`: the token-exact sequence cut into ``prompt_ids`` and ``response_ids`` with
  ``response_mask`` (1 on policy tokens), ``response_logprobs`` and per-token
  ``advantages`` (a turn's advantage on each of its tokens, as palaestra's trainer
  broadcasts them), plus ``group_id`` and the return: what verl, OpenRLHF and custom
  trainers consume offline.

:func:`write_rows` writes ``.jsonl`` or ``.parquet`` by suffix; :func:`read_rows` reads them
back with palaestra's one file loader. Whole episodes (every field, for eval and replay)
are :func:`palaestra.evaluation.report.write_jsonl`'s business.

>>> write_rows(rl_rows(episodes, estimator="grpo"), "rollouts.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from palaestra.core.messages import to_openai_messages
from palaestra.core.types import Episode
from palaestra.integrations.trajectory import split_episode
from palaestra.tasks.files import load_records
from palaestra.trainers.advantages import compute_advantages

Row = dict[str, Any]


def _usable(episodes: Iterable[Episode]) -> list[Episode]:
    return [episode for episode in episodes if episode.error is None]


def _identity(episode: Episode) -> Row:
    return {
        "env_id": episode.env_id,
        "seed": episode.seed,
        "group_id": episode.group_id,
        "reward": episode.total_reward,
        "success": bool(episode.success),
        "num_turns": episode.num_turns,
    }


def sft_rows(episodes: Iterable[Episode]) -> list[Row]:
    """One chat row per episode: ``messages`` (OpenAI form, up to the last assistant
    message) and the episode's identity and outcome."""
    rows = []
    for episode in _usable(episodes):
        messages = to_openai_messages(episode.messages)
        last_assistant = max(
            (i for i, message in enumerate(messages) if message["role"] == "assistant"),
            default=-1,
        )
        rows.append({"messages": messages[: last_assistant + 1], **_identity(episode)})
    return rows


def rl_rows(
    episodes: Iterable[Episode],
    *,
    estimator: str = "grpo",
    gamma: float = 1.0,
    advantages: Sequence[Sequence[float]] | None = None,
) -> list[Row]:
    """One token row per episode with per-token advantages.

    ``advantages`` are per-turn values (one list per episode); without them they are computed
    with ``estimator`` (a name in :data:`palaestra.trainers.advantages.ESTIMATORS`) from the
    episodes' per-turn rewards, groups by ``group_id``. Needs token-level episodes (played
    by an agent with a tokenizer).
    """
    usable = _usable(episodes)
    if advantages is None:
        advantages = compute_advantages(
            estimator,
            [episode.rewards for episode in usable],
            [episode.group_id for episode in usable],
            gamma=gamma,
        )
    if len(advantages) != len(usable):
        raise ValueError(f"{len(advantages)} advantage lists for {len(usable)} episodes")
    rows = []
    for episode, per_turn in zip(usable, advantages, strict=True):
        trajectory = split_episode(episode)
        start = len(trajectory.prompt_ids)
        rows.append(
            {
                "prompt_ids": trajectory.prompt_ids,
                "response_ids": trajectory.response_ids,
                "response_mask": trajectory.response_mask,
                "response_logprobs": trajectory.response_logprobs,
                "advantages": [float(per_turn[t]) for t in episode.turn_index[start:]],
                **_identity(episode),
            }
        )
    return rows


def write_rows(rows: Iterable[Row], path: str | Path) -> int:
    """Write rows to ``path`` (``.jsonl`` or ``.parquet``); returns how many."""
    path = Path(path)
    rows = list(rows)
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(
                "writing Parquet needs pyarrow: `pip install 'palaestra[datasets]'`"
            ) from exc
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        raise ValueError(f"write rows to a .jsonl or .parquet file, not {path.name!r}")
    return len(rows)


def read_rows(path: str | Path) -> list[Row]:
    """Rows written by :func:`write_rows` (any file palaestra's loader reads).

    Parquet stores messages as structs with every key any message has; the keys a message
    did not have (``None``, except ``content``) are dropped again.
    """
    rows = []
    for record in load_records(path):
        row = dict(record)
        if "messages" in row:
            row["messages"] = [_present(message) for message in row["messages"]]
        rows.append(row)
    return rows


def _present(message: Row) -> Row:
    return {key: value for key, value in message.items() if value is not None or key == "content"}
