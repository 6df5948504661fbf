"""Search envs: both protocols, the search budget, rewards that cannot be gamed, loss masking."""

from __future__ import annotations

import asyncio

import pytest

import palaestra
from palaestra.agents import Action, Conversation
from palaestra.envs.base import EPISODE_OVER
from palaestra.envs.search.search_r1 import INVALID_ACTION, search_r1_prompt
from palaestra.runner import Runner, Task
from palaestra.testing import check_env
from palaestra.tools.search import Retriever
from tests.chat_templates import qwen25_tokenizer  # noqa: F401  (fixture)


def test_check_env_passes_on_a_single_hop_variant():
    check_env("search:Synthetic-SingleHop-v0")


def test_search_r1_protocol_episode():
    env = palaestra.make("search:Synthetic-SearchR1-v0")
    assert env.system_prompt is None and env.tools == [] and env.tool_format == "tags"
    observation, info = env.reset(seed=0)
    question = env.unwrapped.question
    assert observation == search_r1_prompt(question) and info["problem_id"] == "synthetic-0-0"
    assert observation.startswith("Answer the given question. You must conduct reasoning")
    assert observation.endswith(f"Question: {question}\n")
    observation, reward, terminated, _, info = env.step("<search>Upper Thagror</search>")
    assert observation.startswith('\n\n<information>Doc 1(Title: "Upper Thagror") Upper Thagror')
    assert observation.endswith("</information>\n\n") and observation.count("\nDoc ") == 2
    assert info["role"] == "assistant" and reward == 0.0 and not terminated
    _, reward, terminated, _, info = env.step("<answer>not it</answer>")
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["metrics"]["em"] == 0.0 and info["metrics"]["searches"] == 1.0


def protocol_env(seed: int = 3):
    env = palaestra.make("search:Synthetic-SearchR1-v0")
    env.reset(seed=seed)
    return env, env.unwrapped.problem.answer[0]


@pytest.mark.parametrize(
    "action",
    [
        "{gold}",
        "\\boxed{{{gold}}}",
        "<think>{gold}</think>",
        "<SEARCH>{gold}</SEARCH>",
        "<Answer>{gold}</Answer>",
        "<answer>{gold}",
        "{gold}</answer>",
        "",
        "<search></answer>{gold}<answer>",
    ],
)
def test_anything_but_search_or_answer_is_an_invalid_action(action):
    """Search-R1: neither tag decides the turn -> its invalid-action message, no grade."""
    env, gold = protocol_env()
    observation, reward, terminated, truncated, info = env.step(action.format(gold=gold))
    assert observation == INVALID_ACTION and reward == 0.0 and not (terminated or truncated)
    assert info["role"] == "assistant" and info["metrics"]["invalid_actions"] == 1.0


@pytest.mark.parametrize(
    ("action", "reward"),
    [
        ("<answer>{gold}</answer> <search>q</search>", 1.0),  # the first tag decides: answer
        ("<think>x</think>\n<answer> {gold} </answer>", 1.0),
        ("<answer></answer>\\boxed{{{gold}}}", 0.0),  # an empty answer, graded as it is
        ("<answer>\\boxed{{{gold}}}</answer>", 0.0),  # graded as written, like Search-R1
        ("<answer><answer>{gold}</answer>", 0.0),  # the answer is "<answer>{gold}"
        ("<answer>wrong</answer><answer>{gold}</answer>", 0.0),  # the first answer counts
    ],
)
def test_only_the_first_answer_tag_is_graded(action, reward):
    env, gold = protocol_env()
    _, got, terminated, _, _ = env.step(action.format(gold=gold))
    assert terminated and got == reward


def test_one_search_per_turn_the_first_tag_decides():
    env, gold = protocol_env()
    observation, _, terminated, _, info = env.step(
        f"<search>Upper Thagror</search><search>b</search><answer>{gold}</answer>"
    )
    assert not terminated and observation.count("<information>") == 1
    assert '(Title: "Upper Thagror")' in observation and info["metrics"]["searches"] == 1.0


def test_a_search_on_the_last_turn_is_not_run():
    env = palaestra.make("search:Synthetic-SearchR1-v0", max_searches=2)
    env.reset(seed=0)
    assert env.max_turns == 3
    for _ in range(2):
        observation, _, terminated, truncated, _ = env.step("<search>x</search>")
        assert observation.startswith("\n\n<information>") and not (terminated or truncated)
    observation, reward, terminated, truncated, info = env.step("<search>x</search>")
    assert observation == "" and reward == 0.0 and truncated and not terminated
    assert info["truncation_reason"] == "turn_limit" and info["metrics"]["searches"] == 2.0
    observation, reward, terminated, _, _ = env.step("<search>x</search>")  # after the end
    assert observation == EPISODE_OVER and reward == 0.0 and terminated


def test_hostile_actions_are_read_in_linear_time():
    env, _ = protocol_env()
    for action in ("<search>" * 200_000, "<answer>" * 200_000 + "</search>", "</" * 500_000):
        observation, *_ = env.step(action)
        assert observation == INVALID_ACTION


def test_the_search_r1_oracle_solves_every_kind():
    for seed in range(40):
        env = palaestra.make("search:Synthetic-SearchR1-v0")
        observation, _ = env.reset(seed=seed)
        policy = env.oracle()
        for _ in range(env.max_turns):
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            if terminated or truncated:
                break
        assert terminated and reward == 1.0, seed


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
    env = palaestra.make("search:Synthetic-v0", world_seed=0)
    env.reset(seed=2)
    call = '<tool_call>{{"name": "search", "arguments": {{"query": "{q}"}}}}</tool_call>'
    observation, *_ = env.step(call.format(q="a") * 8 + call.format(q="b"))
    assert observation.count("Doc 1(Title:") == 8
    assert observation.endswith("error: no searches left (8 used); give your answer")
    observation, *_ = env.step(call.format(q="c"))
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


def test_retrieved_text_is_masked_and_stays_in_the_assistant_message(qwen25_tokenizer):  # noqa: F811
    class SearchThenAnswer:
        tokenizer = qwen25_tokenizer

        def act(self, conversation: Conversation) -> Action:
            if len(conversation.messages) <= 1:
                return Action("<search>Upper Thagror</search>")
            return Action("<answer>1</answer>")

    (episode,) = Runner(SearchThenAnswer()).run([Task("search:Synthetic-SearchR1-v0", seed=0)])
    information = episode.turns[0].observation
    assert information.startswith("\n\n<information>")
    masked = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if not m]
    trained = [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m]
    assert "Upper Thagror is a city" in qwen25_tokenizer.decode(masked)
    assert "is a city" not in qwen25_tokenizer.decode(trained)
    assert qwen25_tokenizer.decode(trained).startswith("<search>Upper Thagror</search>")
    text = qwen25_tokenizer.decode(episode.token_ids)
    assert "<tools>" not in text and "<tool_call>" not in text  # no tool schemas in the prompt
    assert text.endswith(  # one assistant message: search, information, answer
        f"<|im_start|>assistant\n<search>Upper Thagror</search>{information}<answer>1</answer>"
    )
    messages = episode.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert (
        messages[1]["content"] == f"<search>Upper Thagror</search>{information}<answer>1</answer>"
    )


def test_dataset_env_over_the_shipped_sample():
    env = palaestra.make("search:Dataset-SearchR1-v0")
    assert env.problem_count == 5
    observation, _ = env.reset(options={"index": 1})
    assert observation.endswith("Question: In which city was the founder of Orvelle Tarn born?\n")
    observation, *_ = env.step("<search>Ida Vauquelin</search>")
    assert "born in 1378 in the inland city of Brask" in observation
    _, reward, *_ = env.step("<answer>brask</answer>")
    assert reward == 1.0


def test_dataset_env_needs_a_corpus_or_a_server(tmp_path):
    with pytest.raises(ValueError, match="corpus_path="):
        palaestra.make("search:Dataset-v0", corpus_path=None)


class NoDocuments(Retriever):
    def search_many(self, queries, k):
        return [[] for _ in queries]


class Down(Retriever):
    def search_many(self, queries, k):
        raise ConnectionError("server down")


@pytest.mark.parametrize("step", ["step", "astep"])
def test_empty_results_and_failures_in_search_r1s_shape(step):
    """No documents: Search-R1's empty information block; a failing retriever: the error in
    the block, and the episode goes on."""
    for retriever, expected in (
        (NoDocuments(), "\n\n<information></information>\n\n"),
        (
            Down(),
            "\n\n<information>error: search failed: ConnectionError: server down</information>\n\n",
        ),
    ):
        env = palaestra.make("search:Synthetic-SearchR1-v0", retriever=retriever)
        env.reset(seed=0)
        result = getattr(env, step)("<search>q</search>")
        if step == "astep":
            result = asyncio.run(result)
        observation, reward, terminated, truncated, info = result
        assert observation == expected and not (terminated or truncated)
        assert info["role"] == "assistant" and reward == 0.0
