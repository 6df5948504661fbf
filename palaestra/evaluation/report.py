"""Evaluation outputs: trajectories as JSONL, a summary JSON, a self-contained HTML report."""

from __future__ import annotations

import html
import itertools
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from palaestra.core.types import Episode
from palaestra.evaluation.metrics import EnvSummary

MAX_TRANSCRIPTS_PER_ENV = 100


def write_jsonl(episodes: Iterable[Episode], path: Path) -> int:
    """Write one episode per line (``Episode.to_dict``); returns the count."""
    count = 0
    with path.open("w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode.to_dict(), ensure_ascii=False, default=_jsonable) + "\n")
            count += 1
    return count


def _jsonable(value: Any) -> Any:
    """JSON stand-ins for values envs may put in ``info`` (numpy scalars and arrays, sets)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def read_jsonl(path: Path) -> list[Episode]:
    """Episodes written by :func:`write_jsonl`."""
    with path.open(encoding="utf-8") as f:
        return [Episode.from_dict(json.loads(line)) for line in f if line.strip()]


def write_html(
    summaries: Sequence[EnvSummary],
    episodes: Sequence[Episode],
    path: Path,
    *,
    title: str,
    meta: dict[str, Any],
) -> None:
    """A single HTML file (inline CSS, SVG and a few lines of JS) with charts and transcripts."""
    by_env: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        by_env[episode.env_id].append(episode)
    sections = [_env_section(summary, by_env.get(summary.env_id, [])) for summary in summaries]
    meta_items = "".join(f"<span><b>{_e(str(k))}</b> {_e(str(v))}</span>" for k, v in meta.items())
    options = "".join(f'<option value="{_e(s.env_id)}">{_e(s.env_id)}</option>' for s in summaries)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_CSS}</style></head>
<body><header><h1>{_e(title)}</h1><div class="meta">{meta_items}</div></header>
<main>
<section><h2>Summary</h2>{_summary_table(summaries)}{_overview_chart(summaries)}</section>
<section><h2>Environments</h2>
<label>Show <select id="envfilter"><option value="">all environments</option>{options}</select></label>
{"".join(sections)}</section>
</main>
<script>{_JS}</script></body></html>
"""
    path.write_text(page, encoding="utf-8")


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _summary_table(summaries: Sequence[EnvSummary]) -> str:
    ks = sorted({k for s in summaries for k in s.pass_at})
    head = "".join(
        f"<th>{h}</th>"
        for h in [
            "env",
            "episodes",
            "mean reward",
            "success",
            "turns",
            "tokens",
            "errors",
            "wall s",
        ]
        + [f"pass@{k}" for k in ks]
    )
    rows = []
    for s in summaries:
        mark = "" if s.complete else "*"
        success = "–" if s.success_rate is None else f"{_bar(s.success_rate)}{s.success_rate:.0%}"
        cells = [
            f'<td class="id">{_e(s.env_id)}</td>',
            f"<td>{s.episodes}</td>",
            f"<td>{_fmt(s.mean_reward, 3)}{mark}</td>",
            f"<td>{success}{mark}</td>",
            f"<td>{_fmt(s.mean_turns, 1)}{mark}</td>",
            f"<td>{_fmt(s.mean_tokens, 0)}{mark}</td>",
            f'<td class="{"bad" if s.errors else ""}">{s.errors}</td>',
            f"<td>{s.wall_time_s:.2f}</td>",
        ] + [f"<td>{_fmt(s.pass_at.get(k), 3)}</td>" for k in ks]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return table + _incomplete_note(summaries)


def _incomplete_note(summaries: Sequence[EnvSummary]) -> str:
    """Under the table: rows marked ``*`` average over their completed episodes only."""
    incomplete = [s for s in summaries if not s.complete]
    if not incomplete:
        return ""
    errored = sum(s.errors for s in incomplete)
    total = sum(s.episodes for s in incomplete)
    return (
        f'<p class="note bad">* over completed episodes only: {errored} of {total} episodes of '
        f"{len(incomplete)} env(s) errored (their transcripts are below)</p>"
    )


def _bar(fraction: float) -> str:
    width = max(0.0, min(1.0, fraction)) * 60
    return f'<svg class="inline" width="64" height="10"><rect width="60" height="10" rx="2" class="track"/><rect width="{width:.1f}" height="10" rx="2" class="fill"/></svg> '


def _overview_chart(summaries: Sequence[EnvSummary]) -> str:
    """Horizontal bars per env: success rate on a 0-100% axis, mean reward under it on an
    axis from 0 to 1 (or to the largest mean return where one exceeds 1), both values written
    at the bar's end."""
    row, label_w, bar_w, top = 24, 240, 320, 34
    height = top + row * len(summaries) + 24
    top_reward = max([1.0, *(abs(s.mean_reward or 0.0) for s in summaries)])
    parts = [
        f'<svg class="chart" viewBox="0 0 {label_w + bar_w + 150} {height}" role="img" '
        'aria-label="success rate and mean reward per env">',
        f'<text x="{label_w}" y="12" class="legend">■ success rate   '
        f'<tspan class="alt-text">■ mean reward (bar: 0 to {top_reward:g})'
        "</tspan></text>",
    ]
    axis_y = top + row * len(summaries)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + bar_w * tick
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{axis_y}" class="grid"/>'
            f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle">{tick:.0%}</text>'
        )
    for i, s in enumerate(summaries):
        y = top + i * row
        success_w = bar_w * (s.success_rate or 0.0)
        reward_w = bar_w * max(0.0, s.mean_reward or 0.0) / top_reward
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{_e(_short(s.env_id, 36))}'
            f"<title>{_e(s.env_id)}</title></text>"
            f'<rect x="{label_w}" y="{y}" width="{success_w:.1f}" height="9" class="fill"/>'
            f'<rect x="{label_w}" y="{y + 10}" width="{reward_w:.1f}" height="6" class="alt"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 12}">{_fmt_rate(s.success_rate)} · '
            f'<tspan class="alt-text">{_fmt(s.mean_reward)}</tspan></text>'
        )
    parts.append(
        f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + bar_w}" y2="{axis_y}" class="axis"/></svg>'
    )
    return "".join(parts)


def _fmt_rate(rate: float | None) -> str:
    return "–" if rate is None else f"{rate:.0%}"


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


MAX_BARS = 12
"""Histograms with more distinct values than this put the values in ranges."""


def histogram_bins(values: Sequence[float]) -> list[tuple[str, int]]:
    """(label, count) per bar: one bar per distinct value (rounded to 2 decimals) when there
    are at most :data:`MAX_BARS`, else ranges of a round width (1, 2 or 5 times a power of
    ten) so that at most :data:`MAX_BARS` bars remain.

    >>> histogram_bins([1, 1, 2])
    [('1', 2), ('2', 1)]
    >>> histogram_bins(list(range(100)))[:2]
    [('0–9', 10), ('10–19', 10)]
    """
    counts = Counter(round(v, 2) for v in values)
    if len(counts) <= MAX_BARS:
        return [(f"{key:g}", counts[key]) for key in sorted(counts)]
    low, high = min(counts), max(counts)
    whole = all(float(v).is_integer() for v in counts)
    width = _round_width((high - low + whole) / MAX_BARS)
    start = math.floor(low / width) * width

    def bar_of(value: float) -> int:  # the 1e-9 keeps 1.0 // 0.2 (4.0 in floats) in bar 5
        return math.floor((value - start) / width + 1e-9)

    bars = [0] * (bar_of(high) + 1)
    for value, count in counts.items():
        bars[bar_of(value)] += count
    edges = [start + i * width for i in range(len(bars) + 1)]
    if whole:
        labels = [
            f"{a:g}–{b - 1:g}" if b - 1 > a else f"{a:g}" for a, b in itertools.pairwise(edges)
        ]
    else:
        labels = [f"{a:.3g}–{b:.3g}" for a, b in itertools.pairwise(edges)]
    return list(zip(labels, bars, strict=True))


def _round_width(at_least: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``at_least``."""
    power = 10.0 ** math.floor(math.log10(at_least))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= at_least)


LEFT, TOP, PLOT_W, PLOT_H = 34, 18, 290, 110
"""Histogram geometry: y-axis labels on the left, counts above the bars on top."""


def _histogram(values: Sequence[float], label: str) -> str:
    """An SVG bar chart: episodes (y axis, with ticks) per value or range of values (x axis),
    each bar's count above it; long range labels are slanted."""
    bins = histogram_bins(values)
    if not bins:
        return ""
    slanted = len(bins) > 4 and any(len(text) > 4 for text, _ in bins)
    base = TOP + PLOT_H
    title_y = base + (58 if slanted else 30)
    top_count = max(count for _, count in bins)
    parts = [
        f'<figure><svg class="chart" viewBox="0 0 {LEFT + PLOT_W + 6} {title_y + 6}" '
        f'role="img" aria-label="{_e(label)}">',
        *_count_axis(top_count),
    ]
    bar = PLOT_W / len(bins)
    for i, (text, count) in enumerate(bins):
        h = PLOT_H * count / top_count
        x, y = LEFT + i * bar, base - h
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(bar - 2, 1):.1f}" height="{h:.1f}" '
            f'class="fill"><title>{_e(text)}: {count}</title></rect>'
        )
        if count:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>'
            )
        parts.append(_x_label(text, x + bar / 2, base + 13, slanted))
    parts.append(
        f'<line x1="{LEFT}" y1="{base}" x2="{LEFT + PLOT_W}" y2="{base}" class="axis"/>'
        f'<text x="{LEFT + PLOT_W / 2}" y="{title_y}" text-anchor="middle" class="legend">'
        f"{_e(label)}</text></svg></figure>"
    )
    return "".join(parts)


def _count_axis(top_count: int) -> list[str]:
    """The y axis of a histogram: its line, ticks at 0, half and the top count, its title."""
    middle = TOP + PLOT_H / 2
    parts = [
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + PLOT_H}" class="axis"/>'
        f'<text x="10" y="{middle}" text-anchor="middle" class="legend" '
        f'transform="rotate(-90 10 {middle})">episodes</text>'
    ]
    for tick in sorted({0, math.ceil(top_count / 2), top_count}):
        y = TOP + PLOT_H - PLOT_H * tick / top_count
        parts.append(
            f'<line x1="{LEFT - 3}" y1="{y:.1f}" x2="{LEFT + PLOT_W}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    return parts


def _x_label(text: str, x: float, y: float, slanted: bool) -> str:
    if not slanted:
        return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle">{_e(text)}</text>'
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="end" '
        f'transform="rotate(-40 {x:.1f} {y:.1f})">{_e(text)}</text>'
    )


def _env_section(summary: EnvSummary, episodes: list[Episode]) -> str:
    clean = [e for e in episodes if e.error is None]
    charts = _histogram([e.num_turns for e in clean], "turns per episode") + _histogram(
        [e.total_reward for e in clean], "return per episode"
    )
    shown = episodes[:MAX_TRANSCRIPTS_PER_ENV]
    more = len(episodes) - len(shown)
    note = f"<p class='note'>{more} more in trajectories.jsonl</p>" if more > 0 else ""
    return (
        f'<div class="env" data-env="{_e(summary.env_id)}"><h3>{_e(summary.env_id)}</h3>'
        f'<div class="charts">{charts}</div>'
        f"{''.join(_transcript(e) for e in shown)}{note}</div>"
    )


def _transcript(episode: Episode) -> str:
    if episode.error:
        badge = '<span class="badge err">error</span>'
    elif episode.success:
        badge = '<span class="badge ok">success</span>'
    else:
        badge = '<span class="badge no">fail</span>'
    head = (
        f"{badge} seed {episode.seed} · reward {episode.total_reward:g} · "
        f"{episode.num_turns} turns"
        + (f" · truncated ({_e(episode.truncation_reason)})" if episode.truncation_reason else "")
    )
    body = "".join(
        f'<div class="msg {_e(m["role"])}"><div class="role">{_e(m["role"])}</div>'
        f"<pre>{_e(str(m.get('content') or ''))}</pre></div>"
        for m in episode.messages
    )
    if episode.error:
        body += f'<div class="msg error"><div class="role">error</div><pre>{_e(episode.error)}</pre></div>'
    rewards = ", ".join(f"{r:g}" for r in episode.rewards)
    return f"<details><summary>{head}</summary>{body}<p class='note'>rewards per turn: {rewards}</p></details>"


_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--bg:#fff;--card:#f6f8fa;--line:#d0d7de;--accent:#2f81f7;--alt:#8250df;--ok:#1a7f37;--bad:#cf222e}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#8d96a0;--bg:#0d1117;--card:#161b22;--line:#30363d}}
body{font:14px/1.5 system-ui,-apple-system,Segoe UI,sans-serif;color:var(--fg);background:var(--bg);margin:0}
header{padding:20px 32px;border-bottom:1px solid var(--line)}h1{margin:0 0 6px;font-size:22px}
.meta span{margin-right:18px;color:var(--muted)}main{padding:8px 32px 40px;max-width:1200px}
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:6px 12px;border-bottom:1px solid var(--line);text-align:right}
th{color:var(--muted);font-weight:600}td.id,th:first-child{text-align:left;font-family:ui-monospace,monospace}
td.bad{color:var(--bad);font-weight:600}.chart{max-width:720px;width:100%}.chart text{font-size:11px;fill:var(--fg)}
.grid{stroke:var(--line);stroke-width:.5}.axis{stroke:var(--muted);stroke-width:1}
.legend{fill:var(--muted)}.fill{fill:var(--accent)}.alt{fill:var(--alt)}.alt-text{fill:var(--alt)}.track{fill:var(--line)}svg.inline{vertical-align:middle}
.charts{display:flex;gap:24px;flex-wrap:wrap}figure{margin:0;width:340px}figcaption{color:var(--muted);font-size:12px}
.env{border:1px solid var(--line);border-radius:8px;padding:8px 16px;margin:16px 0;background:var(--card)}
details{border-top:1px solid var(--line);padding:6px 0}summary{cursor:pointer}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff}.ok{background:var(--ok)}.no{background:var(--muted)}.err{background:var(--bad)}
.msg{margin:6px 0;border-left:3px solid var(--line);padding-left:10px}.msg.assistant{border-color:var(--accent)}
.msg.tool{border-color:var(--alt)}.msg.error{border-color:var(--bad)}.role{font-size:11px;text-transform:uppercase;color:var(--muted)}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:13px/1.45 ui-monospace,monospace}.note{color:var(--muted);font-size:12px}
"""

_JS = """
document.getElementById('envfilter').addEventListener('change', e => {
  for (const el of document.querySelectorAll('.env'))
    el.style.display = (!e.target.value || el.dataset.env === e.target.value) ? '' : 'none';
});
"""
