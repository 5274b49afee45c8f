"""A headless Chromium screenshot of a rendered report page (`make report-screenshot`, the
analytics tests): the page as people see it, charts and tables at their rendered sizes.

    python -m analytics.screenshot reports/report.html docs/report.png [--width 1280 --height 2400]

Debian's `chromium` (scripts/setup.sh installs it for the dev and analytics setups). Exit status:
0 written, 1 Chromium missing or failed (one line on stderr).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1280, 2400


class ScreenshotError(RuntimeError):
    """No Chromium, or it wrote no PNG."""


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise ScreenshotError(f"no headless browser: install Debian's chromium ({', '.join(BROWSERS)})")


def screenshot(
    page: Path, png: Path, *, width: int = WIDTH, height: int = HEIGHT, timeout: float = 120
) -> Path:
    """Render `page` (a local HTML file) at width x height CSS pixels into `png`."""
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="trioka-chromium-") as profile:
        command = [
            browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}", page.resolve().as_uri(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if not png.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise ScreenshotError(f"chromium wrote no screenshot (exit {done.returncode}): {tail[0]}")
    return png


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analytics.screenshot", description=__doc__)
    p.add_argument("page", type=Path)
    p.add_argument("png", type=Path)
    p.add_argument("--width", type=int, default=WIDTH)
    p.add_argument("--height", type=int, default=HEIGHT)
    ns = p.parse_args(argv)
    try:
        screenshot(ns.page, ns.png, width=ns.width, height=ns.height)
    except (ScreenshotError, subprocess.TimeoutExpired) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"screenshot: {ns.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
