"""Episodes exported as SFT and RL rows to JSONL and Parquet, and loaded back unchanged."""

from __future__ import annotations

import pytest

from palaestra.agents import OracleAgent
from palaestra.integrations.export import read_rows, rl_rows, sft_rows, write_rows
from palaestra.integrations.trajectory import split_episode
from palaestra.runner import Runner, make_tasks
from palaestra.trainers.advantages import compute_advantages

pytest.importorskip("pyarrow", reason="Parquet needs the 'datasets' extra")


@pytest.fixture(scope="module")
def token_episodes():
    pytest.importorskip("tokenizers", reason="the tiny tokenizer needs the 'train' extra")
    from palaestra.trainers import tiny
    from palaestra.trainers.sft import collect_demonstrations

    tokenizer = tiny.train_tokenizer(
        ["I am thinking of a number between 1 and 50."], vocab_size=300
    )
    episodes = collect_demonstrations("game:GuessTheNumber-v0", [0, 0, 1, 1], tokenizer)
    for position, episode in enumerate(episodes):
        episode.group_id = position // 2
    return episodes


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_sft_rows_round_trip_with_tool_calls(tmp_path, suffix):
    episodes = Runner(OracleAgent()).run(make_tasks(["math:Arithmetic-Python-v0"], range(3)))
    rows = sft_rows(episodes)
    assert write_rows(rows, tmp_path / f"sft{suffix}") == 3
    assert read_rows(tmp_path / f"sft{suffix}") == rows
    messages = rows[0]["messages"]
    assert messages[-1]["role"] == "assistant"  # ends with the policy's last turn
    call = next(m for m in messages if m.get("tool_calls"))
    answer = next(m for m in messages if m["role"] == "tool")
    assert answer["tool_call_id"] == call["tool_calls"][0]["id"]
    assert call["tool_calls"][0]["function"]["name"] == "python"
    assert rows[0]["success"] is True and rows[0]["env_id"] == "math:Arithmetic-Python-v0"


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_rl_rows_round_trip_token_exact(tmp_path, token_episodes, suffix):
    rows = rl_rows(token_episodes, estimator="rloo")
    write_rows(rows, tmp_path / f"rl{suffix}")
    assert read_rows(tmp_path / f"rl{suffix}") == rows
    expected = compute_advantages("rloo", [e.rewards for e in token_episodes], [0, 0, 1, 1])
    for row, episode, per_turn in zip(rows, token_episodes, expected, strict=True):
        assert row["prompt_ids"] + row["response_ids"] == episode.token_ids
        start = len(row["prompt_ids"])
        assert row["response_mask"] == episode.loss_mask[start:]
        assert row["response_logprobs"] == episode.logprobs[start:]
        assert len(row["advantages"]) == len(row["response_ids"])
        turns = episode.turn_index[start:]
        assert row["advantages"] == [per_turn[t] for t in turns]
        assert row["reward"] == episode.total_reward


def test_rl_rows_reject_mismatched_advantages_and_text_only_episodes(token_episodes):
    with pytest.raises(ValueError, match="advantage lists"):
        rl_rows(token_episodes, advantages=[[1.0]])
    text_only = Runner(OracleAgent()).run(make_tasks(["game:GuessTheNumber-v0"], [0]))
    with pytest.raises(ValueError, match="tokenizer"):
        split_episode(text_only[0])


def test_errored_episodes_are_left_out(token_episodes):
    broken = Runner(OracleAgent()).run(make_tasks(["game:GuessTheNumber-v0"], [0]))[0]
    broken.error = "RuntimeError: boom"
    assert len(sft_rows([broken, *token_episodes])) == len(token_episodes)


def test_unknown_suffix_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\.jsonl or \.parquet"):
        write_rows([], tmp_path / "rows.csv")
