"""reward="skyrl" against SkyRL-SQL's published reward function, case by case.

``vendored/skyrl_sql_utils.py`` is SkyRL-SQL's reward module, verbatim. Each case is
played through palaestra's env and scored by SkyRL's ``calculate_reward_single`` on the
same text (the policy's turns and the observations they got, joined, as SkyRL scores an
episode), the same gold query and a copy of the same database.
"""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("sqlglot", reason="needs the 'sql' extra (sqlglot)")

import palaestra
from palaestra.verifiers.sql_skyrl import skyrl_solution
from tests.verifiers.vendored.skyrl_sql_utils import (
    calculate_reward_single,
    verify_format_and_extract,
)

SEED = 3


@pytest.fixture(scope="module", params=[1, 3, 7])  # 3 columns; 1 column; text and floats
def episode(request, tmp_path_factory):
    """The env at a seed, its gold query, and a writable copy of its database (SkyRL opens
    it read-write)."""
    env = palaestra.make("sql:Shop-v0", reward="skyrl")
    env.reset(seed=request.param)
    inner = env.unwrapped
    copy = tmp_path_factory.mktemp("skyrl") / "shop.sqlite"
    shutil.copyfile(inner.db_path, copy)
    copy.chmod(0o644)
    return env, request.param, inner.problem.answer, str(copy), len(inner.gold().rows[0])


def gold_variants(gold: str, width: int) -> dict[str, str]:
    names = [f"c{i}" for i in range(width)]
    named = f"WITH g({', '.join(names)}) AS ({gold})"
    last = names[-1]
    nudged = f"CASE WHEN typeof({last}) = 'real' THEN {last} + 1e-12 ELSE {last} END"
    return {
        "gold": gold,
        "gold_twice": f"SELECT * FROM ({gold}) UNION ALL SELECT * FROM ({gold})",  # duplicates
        "gold_reversed": f"SELECT * FROM ({gold}) ORDER BY 1 DESC",
        "gold_limited": f"SELECT * FROM ({gold}) LIMIT 1",
        "gold_swapped": f"{named} SELECT {', '.join(reversed(names))} FROM g",
        "gold_nudged": f"{named} SELECT {', '.join([*names[:-1], nudged])} FROM g",  # floats
    }


FORMATS = {
    "plain": "<think>{t}</think>\n<solution>{q}</solution>",
    "no_think": "<solution>{q}</solution>",
    "empty_think": "<think></think><solution>{q}</solution>",
    "think_after": "<solution>{q}</solution><think>{t}</think>",
    "two_solutions": "<think>{t}</think><solution>{q}</solution><solution>{q}</solution>",
    "unclosed": "<think>{t}</think><solution>{q}",
    "two_closings": "<think>{t}</think><solution>{q}</solution></solution>",
    "think_inside": "<think>{t}</think><solution><think>x</think>{q}</solution>",
    "sql_inside": "<think>{t}</think><solution><sql>{q}</sql></solution>",
    "upper_case": "<think>{t}</think><SOLUTION>{q}</SOLUTION>",
    "spaces": "<think>{t}</think>  <solution>\n  {q} ;\n</solution>  trailing words",
    "no_tags": "{q}",
}
QUERIES = {
    "wrong_constant": "SELECT 12345",
    "syntax_error": "SELEC 1",
    "missing_table": "SELECT * FROM nowhere",
    "two_statements": "SELECT 1; SELECT 2",
    "empty": "",
    "swapped_columns": "SELECT 1, 2",
    "float_noise": "SELECT 0.1 + 0.2",
    "delete": "DELETE FROM orders",
}


def cases(gold: str, width: int = 1) -> list[tuple[str, str]]:
    out = [(f"{form}/{name}", text.format(t="thinking", q=query))
           for name, query in gold_variants(gold, width).items()
           for form, text in FORMATS.items()]  # fmt: skip
    out += [(f"plain/{name}", FORMATS["plain"].format(t="t", q=q)) for name, q in QUERIES.items()]
    return out


def test_single_turn_rewards_equal_skyrl_sqls(episode):
    env, seed, gold, db, width = episode
    checked = set()
    for label, completion in cases(gold, width):
        env.reset(seed=seed)
        ours = env.step(completion)[1]
        theirs = calculate_reward_single(completion, gold, db, timeout=30)
        assert ours == theirs, (label, completion)
        checked.add(theirs)
    assert checked == {-1.0, 0.0, 1.0}  # every outcome was exercised


def test_format_rule_equals_skyrl_sqls_on_every_case(episode):
    _, _, gold, _, width = episode
    transcripts = [text for _, text in cases(gold, width)] + [
        "<think>a</think><sql>x</sql>\n\n<observation>r</observation>\n\n<think>b</think>"
        "<solution>SELECT 1</solution>",
        "<think>a</think><sql>x</sql>\n\n<observation>r</observation>\n\nno think"
        "<solution>SELECT 1</solution>",
        "<think>a</think>\n\n<OBSERVATION>r</Observation>\n\n  <THINK>b</think>"
        "<solution>SELECT 1</solution>",
        "<think>a</think><solution>SELECT 1</solution><observation>after</observation>",
    ]
    for text in transcripts:
        valid, _, solution, _ = verify_format_and_extract(text)
        assert skyrl_solution(text) == (solution if valid else None), text


@pytest.mark.parametrize("follows_rule", [True, False])
def test_multi_turn_episode_scores_like_skyrl_sql(episode, follows_rule):
    _, seed, gold, db, _ = episode
    env = palaestra.make("sql:Shop-SQLTag-v0", reward="skyrl")
    env.reset(seed=seed)
    turns = ["<think>look first</think>\n<sql>SELECT COUNT(*) FROM orders</sql>"]
    observation = env.step(turns[0])[0]
    assert "<observation>" in observation and "</observation>" in observation
    opening = "<think>now answer</think>" if follows_rule else "Now answer."
    final = f"{opening}\n<solution>{gold}</solution>"
    reward = env.step(final)[1]
    transcript = turns[0] + observation + final
    assert reward == calculate_reward_single(transcript, gold, db, timeout=30)
    assert reward == (1.0 if follows_rule else -1.0)


def test_a_turn_with_a_solution_ends_the_episode_even_with_an_sql_tag(episode):
    _, seed, gold, db, _ = episode
    env = palaestra.make("sql:Shop-SQLTag-v0", reward="skyrl")
    env.reset(seed=seed)
    action = f"<think>t</think><sql>SELECT 1</sql><solution>{gold}</solution>"
    _, reward, terminated, *_ = env.step(action)
    assert terminated and reward == calculate_reward_single(action, gold, db, timeout=30)


def test_running_out_of_turns_without_a_solution_scores_minus_one():
    env = palaestra.make("sql:Shop-SQLTag-v0", reward="skyrl")
    env.reset(seed=SEED)
    result = None
    for _ in range(env.max_turns):
        result = env.step("<think>t</think><sql>SELECT 1</sql>")
        if result[2] or result[3]:
            break
    assert result is not None and result[3] and result[1] == -1.0
