"""Evaluation outputs: trajectories as JSONL, a summary JSON, a self-contained HTML report."""

from __future__ import annotations

import html
import json
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
        cells = [
            f'<td class="id">{_e(s.env_id)}</td>',
            f"<td>{s.episodes}</td>",
            f"<td>{_fmt(s.mean_reward, 3)}</td>",
            f"<td>{_bar(s.success_rate)}{s.success_rate:.0%}</td>",
            f"<td>{_fmt(s.mean_turns, 1)}</td>",
            f"<td>{_fmt(s.mean_tokens, 0)}</td>",
            f'<td class="{"bad" if s.errors else ""}">{s.errors}</td>',
            f"<td>{s.wall_time_s:.2f}</td>",
        ] + [f"<td>{_fmt(s.pass_at.get(k), 3)}</td>" for k in ks]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _bar(fraction: float) -> str:
    width = max(0.0, min(1.0, fraction)) * 60
    return f'<svg class="inline" width="64" height="10"><rect width="60" height="10" rx="2" class="track"/><rect width="{width:.1f}" height="10" rx="2" class="fill"/></svg> '


def _overview_chart(summaries: Sequence[EnvSummary]) -> str:
    """Horizontal bars: success rate and mean reward (scaled to the largest) per env."""
    row, label_w, bar_w = 22, 220, 320
    height = row * len(summaries) + 30
    top_reward = max((abs(s.mean_reward) for s in summaries), default=1.0) or 1.0
    parts = [
        f'<svg class="chart" viewBox="0 0 {label_w + bar_w + 80} {height}" role="img" '
        'aria-label="success rate and mean reward per env">'
    ]
    for i, s in enumerate(summaries):
        y = 20 + i * row
        success_w = bar_w * s.success_rate
        reward_w = bar_w * max(0.0, s.mean_reward) / top_reward
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{_e(s.env_id)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{success_w:.1f}" height="8" class="fill"/>'
            f'<rect x="{label_w}" y="{y + 9}" width="{reward_w:.1f}" height="6" class="alt"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 12}">{s.success_rate:.0%}</text>'
        )
    parts.append(
        f'<text x="{label_w}" y="12" class="legend">■ success rate   '
        f'<tspan class="alt-text">■ mean reward (max {top_reward:.2f})</tspan></text></svg>'
    )
    return "".join(parts)


def _histogram(values: Sequence[float], label: str) -> str:
    """A small SVG bar chart of how often each (rounded) value occurs."""
    counts = Counter(round(v, 2) for v in values)
    if not counts:
        return ""
    keys = sorted(counts)[:40]
    top = max(counts.values())
    width, height, bar = 300, 110, 300 / max(len(keys), 1)
    parts = [f'<figure><svg class="chart" viewBox="0 0 {width} {height + 30}">']
    for i, key in enumerate(keys):
        h = height * counts[key] / top
        x = i * bar
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{height - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" '
            f'class="fill"><title>{key:g}: {counts[key]}</title></rect>'
            f'<text x="{x + bar / 2:.1f}" y="{height + 14}" text-anchor="middle">{key:g}</text>'
        )
    parts.append(f"</svg><figcaption>{_e(label)}</figcaption></figure>")
    return "".join(parts)


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
.fill{fill:var(--accent)}.alt{fill:var(--alt)}.alt-text{fill:var(--alt)}.track{fill:var(--line)}svg.inline{vertical-align:middle}
.charts{display:flex;gap:24px;flex-wrap:wrap}figure{margin:0;width:320px}figcaption{color:var(--muted);font-size:12px}
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
