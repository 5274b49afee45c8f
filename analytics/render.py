"""The report's rendering: matplotlib charts (PNG, Agg backend: no display) and one HTML page
(string.Template: no template engine needed for one page) linking the PNGs and CSVs beside it.

Everything here works on pandas frames already collected from the transforms' tables; a chart
function returns False (and writes nothing) when its frame has nothing to draw, so the page can
say what is missing instead.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from string import Template

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files, never to a display

import matplotlib.pyplot as plt
import pandas as pd

MAX_LINES = 12  # series per axes beyond which a legend stops being readable
TABLE_ROWS = 20
PHASES = (
    ("detect_ms", "detection", "#d62728"),
    ("queue_ms", "controller queue", "#ff7f0e"),
    ("election_ms", "election", "#1f77b4"),
    ("propagation_ms", "commit/propagation", "#2ca02c"),
    ("apply_ms", "broker apply", "#9467bd"),
)
GAP_COLOR = "#7f7f7f"
# Columns holding epoch milliseconds (shown as UTC times), not durations.
TIME_COLUMNS = frozenset(
    {
        "ts_ms",
        "fault_ms",
        "detected_ms",
        "elected_ms",
        "applied_ms",
        "window_start_ms",
        "last_ack_before_ms",
        "first_ack_after_ms",
        "max_ts_ms",
    }
)


def utc(ms: float | None) -> str:
    if ms is None or pd.isna(ms):
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _times(ms: pd.Series) -> pd.Series:
    return pd.to_datetime(ms, unit="ms", utc=True)


def _save(fig: plt.Figure, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


PANEL_SIZE = (4.6, 2.8)
"""One small multiple, inches (x 100 dpi): legible as rendered in a 72em page column."""
PANEL_COLUMNS = 3
GAP_FACTOR = 2.0
"""Samples of a series farther apart than this many times its usual interval are not joined:
the line breaks where a broker was down (shipped nothing)."""


def with_gaps(xs: pd.Series, ys: pd.Series, factor: float = GAP_FACTOR) -> tuple[list, list]:
    """xs (epoch ms, sorted) and ys with a NaN point inserted between two samples farther apart
    than `factor` x the median interval, so a plotted line shows the gap instead of bridging it."""
    x, y = list(xs), list(ys)
    if len(x) < 3:
        return x, y
    steps = pd.Series(x).diff().dropna()
    usual = float(steps.median())
    if usual <= 0:
        return x, y
    out_x, out_y = [x[0]], [y[0]]
    for prev, cur, value in zip(x, x[1:], y[1:], strict=False):
        if cur - prev > factor * usual:
            out_x.append((prev + cur) / 2)
            out_y.append(float("nan"))
        out_x.append(cur)
        out_y.append(value)
    return out_x, out_y


def _grid(count: int, columns: int = PANEL_COLUMNS) -> tuple[plt.Figure, list[plt.Axes]]:
    """Small multiples: `count` panels of PANEL_SIZE, `columns` to a row."""
    cols = max(1, min(columns, count))
    rows = -(-count // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows), squeeze=False
    )
    flat = list(axes.flat)
    for extra in flat[count:]:
        extra.set_visible(False)
    return fig, flat[:count]


def _key_text(key: object) -> str:
    return " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))


def lines_chart(
    frame: pd.DataFrame,
    path: Path,
    *,
    value: str,
    series: Sequence[str],
    panels: str | Sequence[str] | None = None,
    title: str,
    ylabel: str,
) -> bool:
    """Small multiples: one small panel per value of `panels` (a column or columns), one line
    per `series` combination in it over ts_ms (or window_start_ms), broken where samples are
    missing (with_gaps). Rows with a null value are skipped."""
    x = "ts_ms" if "ts_ms" in frame.columns else "window_start_ms"
    frame = frame.dropna(subset=[value]) if not frame.empty else frame
    if frame.empty:
        return False
    facet = [panels] if isinstance(panels, str) else list(panels or [])
    groups = list(frame.groupby(facet)) if facet else [(None, frame)]
    fig, axes = _grid(len(groups))
    for ax, (name, part) in zip(axes, groups, strict=True):
        for n, (key, group) in enumerate(part.sort_values(x).groupby(list(series))):
            xs, ys = with_gaps(group[x], group[value])
            ax.plot(_times(pd.Series(xs)), ys, marker=".", markersize=3,
                    label=_key_text(key) if n < MAX_LINES else None)  # fmt: skip
        ax.set_title(title if name is None else _key_text(name), fontsize="medium")
        ax.set_ylabel(ylabel, fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", loc="upper left")
    if facet:
        fig.suptitle(title)
    fig.autofmt_xdate()
    return _save(fig, path)


def grouped_bars(
    frame: pd.DataFrame,
    path: Path,
    *,
    label_cols: Sequence[str],
    value_cols: Sequence[str],
    title: str,
    ylabel: str,
    log: bool = False,
    panels: str | None = None,
) -> bool:
    """One group of bars per row (labelled by label_cols), one bar per value column; with
    `panels`, small multiples: one fixed-size panel per value of that column (a broker), so the
    chart grows in rows of PANEL_COLUMNS and never into a strip thousands of pixels wide."""
    if frame.empty:
        return False
    groups = list(frame.groupby(panels)) if panels else [(None, frame)]
    labels_of = [c for c in label_cols if c != panels]
    fig, axes = _grid(len(groups), columns=2 if panels else 1)
    width = 0.8 / len(value_cols)
    for ax, (name, part) in zip(axes, groups, strict=True):
        labels = [" ".join(str(row[c]) for c in labels_of) for _, row in part.iterrows()]
        for i, col in enumerate(value_cols):
            xs = [j + i * width for j in range(len(part))]
            ax.bar(xs, part[col].fillna(0.0), width=width, label=col)
        ax.set_xticks([j + width * (len(value_cols) - 1) / 2 for j in range(len(part))])
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize="x-small")
        if log:
            ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(title if name is None else _key_text(name), fontsize="medium")
        ax.set_ylabel(ylabel, fontsize="small")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize="x-small")
    if panels:
        fig.suptitle(title)
    return _save(fig, path)


def distribution_chart(frame: pd.DataFrame, path: Path, *, title: str) -> bool:
    """Observations per histogram bucket ((lower, le] in ms), summed over sources."""
    if frame.empty or frame["observations"].sum() <= 0:
        return False
    per_bucket = frame.groupby(["lower", "le"], as_index=False)["observations"].sum()
    per_bucket = per_bucket.sort_values("le")
    labels = [
        f"≤{le:g}" if le != float("inf") else f">{lo:g}"
        for lo, le in zip(per_bucket["lower"], per_bucket["le"], strict=True)
    ]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.bar(labels, per_bucket["observations"], color="#1f77b4")
    ax.set_title(title)
    ax.set_xlabel("ms")
    ax.set_ylabel("count")
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def failover_chart(timeline: pd.DataFrame, path: Path) -> bool:
    """What slows leader switching: per failover, its phases stacked (ms), and the worst
    client-observed unavailability as a marker."""
    if timeline.empty:
        return False
    labels = [f"#{r.failover_id} broker {r.broker_id}" for r in timeline.itertuples()]
    fig, ax = plt.subplots(figsize=(11, max(2.8, 1.2 + 0.6 * len(timeline))))
    left = pd.Series([0.0] * len(timeline), index=timeline.index)
    for col, name, color in PHASES:
        if col not in timeline:
            continue  # a timeline from before the phase was measured
        widths = timeline[col].astype("float64").fillna(0.0)
        ax.barh(labels, widths, left=left, label=name, color=color)
        left = left + widths
    gaps = timeline["unavailability_ms"].astype("float64")
    if gaps.notna().any():
        ax.scatter(gaps, labels, marker="D", color="black", zorder=3, label="client unavailability")
    ax.invert_yaxis()
    ax.set_xlabel("ms since the fault")
    ax.set_title("What slows leader switching")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def size_label(partitions: float) -> str:
    return f"{int(partitions):,}"


def size_chart(sizes: pd.DataFrame, path: Path) -> bool:
    """Leader switching by cluster size: per size (partitions, increasing), the median of each
    phase over its failovers stacked (seconds), and beside it the clients' median gap (a grey
    bar) with their worst gap (a black diamond)."""
    if sizes.empty:
        return False
    if "mode" not in sizes:
        sizes = sizes.assign(mode=None)
    sizes = sizes.sort_values(["mode", "partitions"], na_position="last")
    xs = list(range(len(sizes)))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(sizes) + 3.5), 4.8))
    bottom = pd.Series([0.0] * len(sizes), index=sizes.index)
    for col, name, color in PHASES:
        heights = sizes[col].astype("float64").fillna(0.0) / 1000
        ax.bar([x - width / 2 for x in xs], heights, width, bottom=bottom, label=name, color=color)
        bottom = bottom + heights
    median_gap = sizes["median_unavailability_ms"].astype("float64") / 1000
    max_gap = sizes["max_unavailability_ms"].astype("float64") / 1000
    if median_gap.notna().any():
        ax.bar([x + width / 2 for x in xs], median_gap.fillna(0.0), width, color=GAP_COLOR,
               hatch="//", edgecolor="white", label="client gap (median)")  # fmt: skip
    if max_gap.notna().any():
        ax.scatter([x + width / 2 for x in xs], max_gap, marker="D", color="black", zorder=3,
                   label="client gap (max)")  # fmt: skip
    ax.set_xticks(xs)
    ax.set_xticklabels(
        [
            f"{mode} {size_label(p)}" if isinstance(mode, str) else size_label(p)
            for mode, p in zip(sizes["mode"], sizes["partitions"], strict=True)
        ]
    )
    ax.set_xlabel("metadata mode, partitions in the cluster")
    ax.set_ylabel("seconds (median over the size's failovers)")
    ax.set_title("Leader switching by cluster size")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


# -- the page ------------------------------------------------------------------------------------


@dataclass
class Section:
    title: str
    anchor: str
    charts: list[str] = field(default_factory=list)
    """PNG file names (relative to the page)."""
    tables: list[tuple[str, str, pd.DataFrame]] = field(default_factory=list)
    """(caption, table name: tables/<name>.csv, frame)."""
    notes: list[str] = field(default_factory=list)


def table_html(frame: pd.DataFrame, rows: int = TABLE_ROWS) -> str:
    if frame.empty:
        return "<p class='note'>(no rows)</p>"
    shown = frame.head(rows).copy()
    for col in shown.columns:
        if col in TIME_COLUMNS:
            shown[col] = shown[col].map(utc)
        elif pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(
                lambda v: "" if pd.isna(v) else f"{v:,.3f}".rstrip("0").rstrip(".")
            )
        elif pd.api.types.is_datetime64_any_dtype(shown[col]):
            times = shown[col]
            if times.dt.tz is not None:  # Arrow gives the session's time zone: show UTC
                times = times.dt.tz_convert("UTC")
            shown[col] = times.dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3]
    more = f"<p class='note'>first {rows} of {len(frame)} rows</p>" if len(frame) > rows else ""
    rendered = shown.to_html(index=False, escape=True, border=0, classes="data", na_rep="")
    return f"<div class='scroll'>{rendered}</div>" + more


_PAGE = Template(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>$title</title>
<style>
body { font-family: sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { margin-bottom: 0.2em; } .period { color: #555; margin-top: 0; }
table.data, table.headline { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
table.data th, table.data td, table.headline td { border: 1px solid #ccc; padding: 2px 6px; }
table.data td { overflow-wrap: anywhere; max-width: 24em; }
.scroll { overflow-x: auto; max-width: 100%; }
table.data th { background: #f0f0f0; } table.headline td:first-child { font-weight: bold; }
.note { color: #8a6d00; font-style: italic; } img { max-width: 100%; }
nav a { margin-right: 1em; } section { margin-top: 2em; }
</style></head>
<body>
<h1>$title</h1>
<p class="period">$period</p>
<nav>$nav</nav>
<h2>Headline</h2>
<table class="headline">$headline</table>
$sections
<p class="period">Generated $generated. Every table is in tables/ as CSV and as Parquet.</p>
</body></html>
"""
)


def _section_html(section: Section) -> str:
    parts = [f"<section id='{section.anchor}'><h2>{html.escape(section.title)}</h2>"]
    parts += [f"<p class='note'>{html.escape(note)}</p>" for note in section.notes]
    parts += [f"<img src='{html.escape(png)}' alt='{html.escape(png)}'>" for png in section.charts]
    for caption, name, frame in section.tables:
        link = f"<a href='tables/{html.escape(name)}.csv'>{html.escape(name)}.csv</a>"
        parts.append(f"<h3>{html.escape(caption)} <small>({link})</small></h3>")
        parts.append(table_html(frame))
    parts.append("</section>")
    return "\n".join(parts)


def page(
    *, title: str, period: str, headline: Sequence[tuple[str, str]], sections: Sequence[Section]
) -> str:
    """The whole HTML page: self-contained but for the PNGs and CSVs it links (relative)."""
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in headline
    )
    nav = "".join(f"<a href='#{s.anchor}'>{html.escape(s.title)}</a>" for s in sections)
    return _PAGE.substitute(
        title=html.escape(title),
        period=html.escape(period),
        nav=nav,
        headline=rows,
        sections="\n".join(_section_html(s) for s in sections),
        generated=utc(datetime.now(tz=UTC).timestamp() * 1000) + " UTC",
    )
