"""Tool-integrated reasoning ids (``math:*-Python-v0``): oracle, budget, runner, masks, eval, HTTP."""

from __future__ import annotations

import re

import numpy as np
import pytest
from typer.testing import CliRunner

import palaestra
from palaestra.agents import OracleAgent, PolicyAgent
from palaestra.agents.base import Action
from palaestra.agents.openai import OpenAIAgent
from palaestra.cli import app
from palaestra.core.tool_calls import ToolCall, format_tool_call
from palaestra.runner import Runner, make_tasks
from tests.chat_templates import qwen25_tokenizer  # noqa: F401  (fixture)
from tests.openai_stub import StubServer

pytest.importorskip("math_verify", reason="needs the 'math' extra (math-verify)")

PYTHON_IDS = palaestra.list_envs("math:*-Python-v0")


def test_every_procedural_family_and_the_dataset_have_a_python_variant():
    names = {re.match(r"math:(\w+)-Python-v0", i).group(1) for i in PYTHON_IDS}
    assert names == {"Arithmetic", "Fractions", "LinearEquation", "WordProblem", "Dataset"}
    spec = palaestra.spec("math:Fractions-Python-v0")
    assert spec.wrapper_stack.startswith("ToolEnv(tools=[{'name': 'python', 'stateful': True}]")


@pytest.mark.parametrize("env_id", [i for i in PYTHON_IDS if "Dataset" not in i])
def test_oracle_computes_with_the_tool_then_answers(env_id):
    env = palaestra.make(env_id)
    assert env.max_turns == 1 + env.max_tool_turns
    for seed in range(3):
        observation, _ = env.reset(seed=seed)
        policy = env.oracle()
        action = policy(observation)
        assert "<tool_call>" in action
        observation, reward, terminated, _, info = env.step(action)
        assert info["role"] == "tool" and info["tool_outputs"] == [observation] and reward == 0
        assert observation == str(env.unwrapped.problem.answer)  # the sandbox really ran it
        _, reward, terminated, truncated, info = env.step(policy(observation))
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_the_dataset_variant_answers_through_the_wrapped_oracle():
    env = palaestra.make("math:Dataset-Python-v0")
    assert env.problem_count == palaestra.make("math:Dataset-v0").problem_count == 16
    observation, _ = env.reset(seed=0)
    assert env.step(env.oracle()(observation))[1] == 1.0


def _calls_forever(observation: str) -> str:
    return format_tool_call(ToolCall("python", {"code": "print(1)"}))


def test_tool_turns_count_toward_one_budget_and_truncate():
    (episode,) = Runner(PolicyAgent(_calls_forever)).run(
        make_tasks(["math:Arithmetic-Python-v0"], [0])
    )
    assert episode.num_turns == 9 and episode.truncation_reason == "turn_limit"
    assert "no tool calls left" in episode.turns[-1].observation
    assert episode.turns[-1].truncated and episode.success is False


def _scripted_tool_user(observation: str) -> str:
    """Compute the task's expression with the tool, then answer with the tool's output."""
    task = re.search(r"Compute (.+)\.$", observation)
    if task is not None:
        return format_tool_call(ToolCall("python", {"code": f"print({task.group(1)})"}))
    return "\\boxed{" + observation.strip() + "}"


def test_process_pool_rebuilds_the_wrapper_stack():
    tasks = make_tasks(["math:Arithmetic-Python-v0"], range(4))
    local = Runner(PolicyAgent(_scripted_tool_user)).run(tasks)
    pooled = Runner(PolicyAgent(_scripted_tool_user), process_workers=1).run(tasks)
    assert all(e.success for e in local) and all(e.error is None for e in pooled)
    assert [e.messages for e in pooled] == [e.messages for e in local]


def test_runner_and_oracle_agent_solve_every_episode():
    episodes = Runner(OracleAgent()).run(
        make_tasks(["math:Arithmetic-Python-v0", "math:WordProblem-Python-v0"], range(6))
    )
    assert all(e.success and e.num_turns == 2 for e in episodes), [e.error for e in episodes]
    assert episodes[0].messages[3]["role"] == "tool"


class _TokenOracle:
    """The oracle, reporting token ids as an engine would (token-in, token-out)."""

    name = "token-oracle"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.oracle = OracleAgent()

    def act(self, conversation) -> Action:
        text = self.oracle.act(conversation).text
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return Action(text, ids, [-0.5] * len(ids), "stop")


@pytest.mark.parametrize("masked", [True, False])
def test_tool_results_are_masked_from_the_loss_by_default(qwen25_tokenizer, masked):  # noqa: F811
    runner = Runner(_TokenOracle(qwen25_tokenizer), mask_observations=masked)
    (episode,) = runner.run(make_tasks(["math:Arithmetic-Python-v0"], [1]))
    assert episode.success
    ids, mask = np.array(episode.token_ids), np.array(episode.loss_mask)
    turn0 = np.array(episode.turn_index) == 0
    tool_part = qwen25_tokenizer.decode(ids[turn0 & (mask == (0 if masked else 1))].tolist())
    assert "<tool_response>\n-256\n</tool_response>" in tool_part
    policy_text = qwen25_tokenizer.decode(ids[mask == 1].tolist())
    assert ("<tool_response>" in policy_text) is (not masked)
    assert "\\boxed{-256}" in policy_text


def test_palaestra_eval_runs_the_tool_variant():
    result = CliRunner().invoke(
        app, ["eval", "math:Arithmetic-Python-v0", "--agent", "oracle", "-n", "4", "-q"]
    )
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "Arithmetic-Python" in line)
    assert "100%" in row


def test_openai_chat_agent_speaks_tool_calls_to_a_strict_server():
    with StubServer(tools=True) as server:
        agent = OpenAIAgent("stub", server.url, max_retries=0)
        episodes = Runner(agent).run(make_tasks(["math:Arithmetic-Python-v0"], range(3)))
    assert all(e.error is None and e.success for e in episodes), [e.error for e in episodes]
    second = next(body for _, body in server.requests if body["messages"][-1]["role"] == "tool")
    assert second["tools"][0]["function"]["name"] == "python"
    assistant, tool = second["messages"][-2:]
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert tool["content"] in {e.turns[0].observation for e in episodes}
    assert len(server.requests) == 6  # two per episode: nothing was rejected
