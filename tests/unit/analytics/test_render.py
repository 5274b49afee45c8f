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
