"""The HTML report: charts with axes and counts, readable labels, badges from the env's flag."""

from __future__ import annotations

import re

import pytest

from palaestra.agents import OracleAgent
from palaestra.core.types import Episode, Turn
from palaestra.evaluation import EvalConfig, evaluate, summarize, write_html
from palaestra.evaluation.report import MAX_BARS, histogram_bins


def _episode(seed: int, turns: int, reward: float, success: bool) -> Episode:
    steps = [Turn("a", "o", 0.0, False) for _ in range(turns - 1)]
    steps.append(Turn("a", "o", reward, True))
    return Episode("x:Game-v0", seed, "task", turns=steps, success=success)


def _report(tmp_path, episodes: list[Episode]) -> str:
    path = tmp_path / "report.html"
    write_html(summarize(episodes), episodes, path, title="t", meta={})
    return path.read_text()


@pytest.mark.parametrize("values", [list(range(180, 520)), [i / 7 for i in range(90)], [3] * 5])
def test_many_values_become_a_few_ranges_with_short_labels(values):
    bins = histogram_bins(values)
    assert 1 <= len(bins) <= MAX_BARS
    assert sum(count for _, count in bins) == len(values)
    assert all(len(label) <= 11 for label, _ in bins), bins


def test_histograms_have_axes_and_counts(tmp_path):
    episodes = [
        _episode(seed, turns=200 + 7 * seed, reward=1.0, success=True) for seed in range(40)
    ]
    page = _report(tmp_path, episodes)
    (turns_chart,) = re.findall(r'<svg[^>]*aria-label="turns per episode".*?</svg>', page, re.S)
    assert ">episodes</text>" in turns_chart  # the y axis's title
    assert turns_chart.count('class="axis"') == 2  # both axes drawn
    bars = re.findall(r"<title>([^<]*): (\d+)</title>", turns_chart)
    assert 1 < len(bars) <= MAX_BARS and sum(int(count) for _, count in bars) == 40
    for label, count in bars:  # the count is written above its bar, the range below
        assert f">{count}</text>" in turns_chart and f">{label}</text>" in turns_chart


def test_badges_and_success_rate_follow_the_envs_flag(tmp_path):
    draws = [_episode(seed, turns=5, reward=0.5, success=False) for seed in range(3)]
    page = _report(tmp_path, [*draws, _episode(9, turns=4, reward=1.0, success=True)])
    assert page.count('class="badge ok">success') == 1
    assert page.count('class="badge no">fail') == 3
    assert "25%" in page  # the summary's success rate: 1 of 4


def test_a_tic_tac_toe_draw_is_not_a_success(tmp_path):
    result = evaluate(OracleAgent(), EvalConfig(["game:TicTacToe-Hard-v0"], episodes=4))
    assert all(e.total_reward == 0.5 and e.success is False for e in result.episodes)
    page = _report(tmp_path, result.episodes)
    assert "badge ok" not in page and page.count('class="badge no">fail') == 4


def _reward_bar_width(page: str) -> float:
    """The width of the one env's mean-reward bar in the overview chart (axis: 320)."""
    (width,) = re.findall(r'<rect x="\d+" y="\d+" width="([\d.]+)" height="6" class="alt"/>', page)
    return float(width)


def test_the_mean_reward_bar_is_on_a_fixed_axis_not_scaled_to_the_largest(tmp_path):
    low = [_episode(seed, turns=1, reward=0.06, success=False) for seed in range(4)]
    assert _reward_bar_width(_report(tmp_path, low)) == pytest.approx(320 * 0.06, abs=0.1)
    shaped = [_episode(seed, turns=1, reward=2.0, success=True) for seed in range(4)]
    assert _reward_bar_width(_report(tmp_path, shaped)) == pytest.approx(320, abs=0.1)


def test_a_row_with_errored_episodes_is_marked_and_explained(tmp_path):
    crashed = Episode("x:Game-v0", 7, "task", error="RuntimeError: boom")
    page = _report(tmp_path, [_episode(1, turns=2, reward=1.0, success=True), crashed])
    assert "<td>1.000*</td>" in page
    assert "* over completed episodes only: 1 of 2 episodes of 1 env(s) errored" in page
