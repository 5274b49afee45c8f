"""Rendering without Spark: tables as HTML (times in UTC, escaped), charts only when there is
something to draw, the page's notes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import image

from analytics import render

T0 = 1_790_000_000_000  # 2026-09-21T14:13:20Z


def test_table_html_shows_utc_times_and_escapes() -> None:
    paris = pd.to_datetime([T0], unit="ms", utc=True).tz_convert("Europe/Paris")
    frame = pd.DataFrame({"ts": paris, "fault_ms": [T0], "detect_ms": [1500.25], "t": ["<b>"]})
    out = render.table_html(frame)
    assert out.count("2026-09-21 14:13:20.000") == 2  # ts and fault_ms (a time), not detect_ms
    assert "1,500.25" in out
    assert "&lt;b&gt;" in out and "<b>" not in out


def test_charts_are_skipped_without_data(tmp_path: Path) -> None:
    empty = pd.DataFrame({"ts_ms": [], "value": [], "source": []})
    assert not render.lines_chart(
        empty, tmp_path / "a.png", value="value", series=["source"], title="t", ylabel="y"
    )
    assert not render.failover_chart(pd.DataFrame(), tmp_path / "b.png")
    assert not render.size_chart(pd.DataFrame(), tmp_path / "c.png")
    assert list(tmp_path.iterdir()) == []


def test_failover_chart(tmp_path: Path) -> None:
    timeline = pd.DataFrame(
        {
            "failover_id": [1, 2],
            "broker_id": [2, 3],
            "detect_ms": [6000.0, None],
            "queue_ms": [1.0, 2.0],
            "election_ms": [40.0, 10.0],
            "propagation_ms": [None, 90.0],
            "apply_ms": [30.0, None],
            "unavailability_ms": [6410.0, None],
        }
    )
    assert render.failover_chart(timeline, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")


def test_size_chart(tmp_path: Path) -> None:
    """One stacked bar per size, smallest first, the clients' gaps beside; legible at its size
    (at least 700 x 400 pixels)."""
    phases = {c: [1500.0, 300.0, None] for c, _, _ in render.PHASES}
    sizes = pd.DataFrame(
        {
            "partitions": [25_000, 1_000, 50_000],
            "failovers": [2, 1, 1],
            **phases,
            "median_unavailability_ms": [9000.0, 700.0, None],
            "max_unavailability_ms": [12000.0, 700.0, None],
        }
    )
    path = tmp_path / "sizes.png"
    assert render.size_chart(sizes, path)
    height, width = image.imread(path).shape[:2]
    assert width >= 700 and height >= 400
    assert [render.size_label(p) for p in sorted(sizes["partitions"])] == [
        "1,000",
        "25,000",
        "50,000",
    ]


def test_page_has_sections_notes_and_links() -> None:
    section = render.Section("Failovers", "failovers", charts=["failovers.png"])
    section.notes.append("No chaos history in this period.")
    section.tables.append(("Timeline", "failover_timeline", pd.DataFrame({"a": [1]})))
    html = render.page(title="r", period="p", headline=[("Failovers", "1")], sections=[section])
    assert "<img src='failovers.png'" in html
    assert "tables/failover_timeline.csv" in html
    assert "No chaos history in this period." in html
    assert "<td>Failovers</td><td>1</td>" in html


def test_lines_break_where_samples_are_missing() -> None:
    """A broker down for a minute between 10 s samples: the line is not drawn across the gap."""
    xs = pd.Series(
        [T0 + i * 10_000 for i in range(5)] + [T0 + 100_000 + i * 10_000 for i in range(3)]
    )
    ys = pd.Series(range(8), dtype=float)
    gx, gy = render.with_gaps(xs, ys)
    assert len(gx) == 9 and pd.isna(gy[5]) and T0 + 40_000 < gx[5] < T0 + 100_000
    assert render.with_gaps(xs[:5], ys[:5]) == (list(xs[:5]), list(ys[:5]))  # no gap, no NaN


def test_many_bars_are_small_multiples_not_a_strip(tmp_path: Path) -> None:
    """3 brokers x 20 APIs: panels of a fixed size (one per broker), at most ~1,000 px wide
    and each bar group wide enough to read, not a 5,690 px strip."""
    frame = pd.DataFrame(
        [
            {"source": f"broker-{b}", "request": f"Api{r}", "p50": 1.0, "p95": 5.0, "p99": 9.0}
            for b in (1, 2, 3)
            for r in range(20)
        ]
    )
    path = tmp_path / "bars.png"
    assert render.grouped_bars(frame, path, label_cols=["source", "request"],
                               value_cols=["p50", "p95", "p99"], title="t", ylabel="ms",
                               log=True, panels="source")  # fmt: skip
    height, width = image.imread(path).shape[:2]
    assert width <= 1_000 and height <= 1_000, (width, height)


def test_lines_are_one_small_panel_per_facet(tmp_path: Path) -> None:
    rows = [
        {"ts_ms": T0 + i * 10_000, "source": f"broker-{b}", "topic": t, "rate_per_s": float(i)}
        for b in (1, 2, 3)
        for t in ("a", "b", "c", "d")
        for i in range(360)
    ]
    path = tmp_path / "lines.png"
    assert render.lines_chart(pd.DataFrame(rows), path, value="rate_per_s", series=["source"],
                              panels="topic", title="t", ylabel="/s")  # fmt: skip
    height, width = image.imread(path).shape[:2]
    cols = render.PANEL_COLUMNS
    assert width == round(render.PANEL_SIZE[0] * cols * 100)  # 3 panels to a row
    assert height == round(render.PANEL_SIZE[1] * 2 * 100)  # 4 topics: 2 rows


def test_wide_tables_scroll_inside_the_page() -> None:
    frame = pd.DataFrame({f"column_{i}": ["x" * 40] for i in range(30)})
    out = render.table_html(frame)
    assert out.startswith("<div class='scroll'>")
    html = render.page(title="r", period="p", headline=[], sections=[])
    assert ".scroll { overflow-x: auto" in html and "overflow-wrap: anywhere" in html
