"""Search envs: both protocols, the search budget, rewards that cannot be gamed, loss masking."""

from __future__ import annotations

import pytest

import palaestra
from palaestra.agents import Action, Conversation
from palaestra.runner import Runner, Task
from palaestra.testing import check_env
from tests.chat_templates import qwen25_tokenizer  # noqa: F401  (fixture)


def test_check_env_passes_on_a_single_hop_variant():
    check_env("search:Synthetic-SingleHop-v0")


def test_search_r1_protocol_episode():
    env = palaestra.make("search:Synthetic-SearchR1-v0")
    assert env.tool_format == "tags" and "<search>query</search>" in env.system_prompt
    observation, info = env.reset(seed=0)
    assert observation.startswith("Question: ") and info["problem_id"] == "synthetic-0-0"
    observation, reward, terminated, _, info = env.step("<search>Upper Thagror</search>")
    assert observation.startswith("<information>Doc 1(Title: Upper Thagror)")
    assert observation.endswith("</information>") and info["role"] == "tool" and reward == 0.0
    _, reward, terminated, _, info = env.step("<answer>not it</answer>")
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["metrics"]["em"] == 0.0


def test_default_format_episode_and_f1_metric():
    env = palaestra.make("search:Synthetic-v0", metric="f1")
    env.reset(seed=1)
    answer = env.unwrapped.problem.answer[0]
    call = '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    _, _, _, _, info = env.step(call)
    assert info["role"] == "tool"
    _, reward, terminated, _, info = env.step(f"I think <answer>{answer} maybe</answer>")
    assert terminated and 0.0 < reward < 1.0 and not info["success"]


def test_the_search_budget_counts_calls_not_steps():
    env = palaestra.make("search:Synthetic-SearchR1-v0", world_seed=0)
    env.reset(seed=2)
    observation, *_ = env.step("<search>a</search>" * 8 + "<search>b</search>")
    assert observation.count("<information>") == 8
    assert observation.endswith("error: no searches left (8 used); give your answer")
    observation, *_ = env.step("<search>c</search>")
    assert observation == "error: no searches left (8 used); give your answer"


@pytest.mark.parametrize(
    "action",
    [
        "<answer></answer>",
        "<answer>" + " ".join(["Sevelael", "1895", "Brask"] * 300) + "</answer>",
        "\\boxed{}",
        "<information>Doc 1(Title: x) y</information><answer>x</answer>",
    ],
)
def test_answer_spam_gets_no_reward(action):
    env = palaestra.make("search:Synthetic-v0")
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(action)
    assert terminated and reward == 0.0


def test_retrieved_text_is_masked_from_the_loss(qwen25_tokenizer):  # noqa: F811
    class SearchThenAnswer:
        tokenizer = qwen25_tokenizer

        def act(self, conversation: Conversation) -> Action:
            if len(conversation.messages) <= 2:
                return Action("<search>Upper Thagror</search>")
            return Action("<answer>1</answer>")

    (episode,) = Runner(SearchThenAnswer()).run([Task("search:Synthetic-SearchR1-v0", seed=0)])
    assert episode.turns[0].observation.startswith("<information>")
    masked = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if not m]
    trained = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    assert "Upper Thagror is a city" in qwen25_tokenizer.decode(masked)
    assert "is a city" not in qwen25_tokenizer.decode(trained)
    assert qwen25_tokenizer.decode(trained).startswith("<search>Upper Thagror</search>")


def test_dataset_env_over_the_shipped_sample():
    env = palaestra.make("search:Dataset-SearchR1-v0")
    assert env.problem_count == 5
    observation, _ = env.reset(options={"index": 1})
    assert observation == "Question: In which city was the founder of Orvelle Tarn born?"
    observation, *_ = env.step("<search>Ida Vauquelin</search>")
    assert "born in 1378 in the inland city of Brask" in observation
    _, reward, *_ = env.step("<answer>brask</answer>")
    assert reward == 1.0


def test_dataset_env_needs_a_corpus_or_a_server(tmp_path):
    with pytest.raises(ValueError, match="corpus_path="):
        palaestra.make("search:Dataset-v0", corpus_path=None)
