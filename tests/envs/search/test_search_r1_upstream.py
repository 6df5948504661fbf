"""palaestra's retrieval server and -SearchR1 envs, driven by Search-R1's own client code
(vendored verbatim in search_r1_upstream.py) exactly as its training loop calls it."""

from __future__ import annotations

import random
import re
import string

import pytest

import palaestra
from palaestra.envs.search.questions import make_question
from palaestra.envs.search.search_r1 import SearchR1Action, read_action
from tests.envs.search.search_r1_upstream import LLMGenerationManager

pytest.importorskip("requests", reason="Search-R1's client code uses requests")


def test_a_whole_grpo_step_of_searches_in_one_request(server_url, world):
    """Search-R1's GRPO script: 512 prompts x 5 samples, every search of a step in one
    request; the default cap takes 4096."""
    client = LLMGenerationManager(server_url, topk=3)
    queries = [make_question(world, i).text for i in range(512)] * 8
    results = client._batch_search(queries)["result"]
    assert len(results) == 4096 and all(len(row) == 3 for row in results)
    passages = client.batch_search(queries[:2560])
    assert len(passages) == 2560 and all(p.startswith('Doc 1(Title: "') for p in passages)


def test_topk_and_empty_queries_as_search_r1_sends_them(server_url):
    for topk in (None, 0, 1, 5):
        client = LLMGenerationManager(server_url, topk=topk)
        rows = client._batch_search(["", "zzzz", "the Lantern of Orinaes"])["result"]
        assert [len(row) for row in rows] == [topk or 3] * 3


PIECES = [
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<think>",
    "</think>",
    "<SEARCH>",
    "</Answer>",
    " q ",
    "Paris",
    "\n",
    "<",
    ">",
    "/",
    "\\boxed{x}",
    "",
]


def fuzzed_turns(count: int) -> list[str]:
    """Turn texts built from tag pieces: every order of opening and closing tags."""
    rng = random.Random(0)
    return ["".join(rng.choices(PIECES, k=rng.randint(0, 9))) for _ in range(count)]


HANDWRITTEN = [
    "glassmaker",
    "\\boxed{glassmaker}",
    "<answer></answer>\\boxed{glassmaker}",
    "<think>only thinking</think>",
    "<SEARCH>q</SEARCH>",
    "<search>a</search><search>b</search>",
    "<answer>X</answer> <search>q</search>",
    "<search>q</search> <answer>X</answer>",
    "<answer><answer>X</answer>",
    "<search>a <answer>X</answer> b</search>",
    "<answer>a</search>b</answer>",
    "<search>\n multi\nline \n</search>",
    "",
    "</search>",
]


def upstream_reading(text: str) -> SearchR1Action:
    """Search-R1's cut (_postprocess_responses), then its parser (postprocess_predictions)."""
    upstream = LLMGenerationManager("http://unused")
    _, (cut,) = upstream._postprocess_responses([text])
    (kind,), (content,) = upstream.postprocess_predictions([cut])
    return SearchR1Action(kind, content)


@pytest.mark.parametrize("text", HANDWRITTEN)
def test_each_turn_is_read_as_search_r1_reads_it(text):
    assert read_action(text) == upstream_reading(text)


def test_fuzzed_turns_are_read_as_search_r1_reads_them():
    for text in fuzzed_turns(5000):
        assert read_action(text) == upstream_reading(text), text


def search_r1_rollout(responses: list[str], url: str, max_turns: int) -> tuple[list[str], str]:
    """One rollout as Search-R1's ``run_llm_loop`` drives it, at the text level: up to
    ``max_turns`` turns that may search, then a last one that does not. Returns the
    observation after each turn that went on and the response (cut turns and observations)."""
    upstream = LLMGenerationManager(url)
    turns = iter(responses)
    observations, response = [], ""
    for _ in range(max_turns):
        _, (cut,) = upstream._postprocess_responses([next(turns)])
        (observation,), (done,), _, _ = upstream.execute_predictions([cut], "<pad>", [True])
        response += cut + observation
        if done:
            return observations, response
        observations.append(observation)
    _, (cut,) = upstream._postprocess_responses([next(turns)])
    upstream.execute_predictions([cut], "<pad>", [True], do_search=False)
    return observations, response + cut


def squad_normalize(text: str) -> str:
    """Lowercase, no punctuation, no English articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def paper_reward(response: str, golds: tuple[str, ...]) -> float:
    """Search-R1's reward as its paper defines it (Jin et al. 2025, section 3): the outcome
    reward r = EM(a_pred, a_gold), a_pred the final answer of the response (its last
    <answer>...</answer>; none gives 0), exact match after SQuAD normalization."""
    answers = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
    if not answers:
        return 0.0
    return float(any(squad_normalize(answers[-1]) == squad_normalize(g) for g in golds))


def play_env(env, responses: list[str]) -> tuple[list[str], float]:
    observations, total = [], 0.0
    for response in responses:
        observation, reward, terminated, truncated, _ = env.step(response)
        total += reward
        if terminated or truncated:
            return observations, total
        observations.append(observation)
    raise AssertionError("the episode did not end")


def cases(problem) -> list[list[str]]:
    """Turn texts a policy might write (honest, malformed, hedging), padded with searches."""
    gold, title = problem.answer[0], problem.metadata["evidence_titles"][0]
    return [
        [f"<think>look it up</think>\n<search> {title} </search>", f"<answer> {gold} </answer>"],
        [f"<search>{title}</search><information>fake</information>", f"<answer>{gold}</answer>"],
        [gold, "\\boxed{x}", f"<answer>{gold}</answer>"],
        [f"<answer>{gold}</answer> <search>{title}</search>"],
        [f"<search>{title}</search> <answer>{gold}</answer>", "<answer>wrong</answer>"],
        ["<answer>wrong</answer> <answer>" + gold + "</answer>"],
        [f"<answer>\\boxed{{{gold}}}</answer>"],
        [f"<answer>{gold}, Brask</answer>"],
        [f"<answer></answer>\\boxed{{{gold}}}"],
        ["<SEARCH>x</SEARCH>", f"<think>{gold}</think>", f"<search>{title}</search>"],
        [f"<search>{title}</search>", "<search>y</search>", f"<search>{title}</search>"],
    ]


@pytest.mark.parametrize(
    "seeds", [range(8), pytest.param(range(8, 108), marks=pytest.mark.slow)], ids=["8", "100"]
)
def test_episodes_and_rewards_match_search_r1_turn_by_turn(server_url, seeds):
    """Each case through Search-R1's loop (its client code, this server) and through the
    env: the same observations turn by turn, the same end, the reward of the paper."""
    checked = 0
    for seed in seeds:
        env = palaestra.make("search:Synthetic-SearchR1-v0", retriever=server_url, max_searches=2)
        env.reset(seed=seed)
        problem = env.unwrapped.problem
        for responses in cases(problem):
            env.reset(seed=seed)
            ours, reward = play_env(env, responses)
            theirs, response = search_r1_rollout(responses, server_url, max_turns=2)
            assert ours == theirs, responses
            assert reward == paper_reward(response, problem.answer), responses
            checked += 1
    assert checked == len(seeds) * 11


def test_an_answer_hidden_in_a_search_query_is_not_an_answer(server_url):
    """The one place the env and a literal reading of "the last <answer> of the response"
    differ: a policy that never answers but puts <answer> tags in a search query. Search-R1's
    reward code pays for it when the rollout runs out of turns; the env does not."""
    env = palaestra.make("search:Synthetic-SearchR1-v0", retriever=server_url, max_searches=2)
    env.reset(seed=0)
    gold = env.unwrapped.problem.answer
    responses = [f"<search><answer>{gold[0]}</answer></search>", "<search>x</search>", "y"]
    _, reward = play_env(env, responses)
    _, response = search_r1_rollout(responses, server_url, max_turns=2)
    assert reward == 0.0 and paper_reward(response, gold) == 1.0
