"""The rendered page looked at in a headless Chromium (Debian's chromium, installed by
scripts/setup.sh for the dev and analytics setups: no skip): a page of small-multiple charts and
a wide table comes out as a PNG of the window's size, not blank, its width not stretched."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import image

from analytics import render
from analytics.screenshot import screenshot

T0 = 1_790_000_000_000


def test_a_rendered_report_page_screenshots_at_a_sane_size(tmp_path: Path) -> None:
    rows = [
        {"ts_ms": T0 + i * 10_000, "source": f"broker-{b}", "topic": t, "rate_per_s": float(i % 7)}
        for b in (1, 2, 3)
        for t in ("orders", "payments")
        for i in range(360)
        if not (b == 2 and 150 <= i < 180)  # broker 2 down: a gap
    ]
    assert render.lines_chart(pd.DataFrame(rows), tmp_path / "throughput_user.png",
                              value="rate_per_s", series=["source"], panels="topic",
                              title="User topics", ylabel="per second")  # fmt: skip
    section = render.Section("Throughput", "throughput", charts=["throughput_user.png"])
    wide = pd.DataFrame({f"column_{i}": ["a-long-value-" * 4] * 3 for i in range(25)})
    section.tables.append(("A wide table", "wide", wide))
    page = tmp_path / "report.html"
    page.write_text(render.page(title="r", period="p", headline=[("a", "1")], sections=[section]))
    png = screenshot(page, tmp_path / "report.png", width=1280, height=1600)
    assert 20_000 < png.stat().st_size < 5_000_000
    pixels = image.imread(png)
    assert pixels.shape[:2] == (1600, 1280)  # the window asked for
    assert pixels[..., :3].std() > 0.05  # not a blank page: the chart and the table are drawn
