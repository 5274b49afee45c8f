"""Progress lines for `trioka report`: one line per step on stderr, `[  12.3s] stage: what`,
so a slow stage shows which one it is (Spark's own logging is quieted to FATAL)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

Progress = Callable[[str, str], None]
"""progress(stage, what): a step is starting."""


def silent(_stage: str, _what: str = "") -> None:
    """No progress lines (build_report's default)."""


class ProgressLines:
    """Prints `[elapsed] stage: what` on `stream` (stderr), elapsed since construction."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._t0 = clock()
        self.lines: list[tuple[float, str, str]] = []

    def __call__(self, stage: str, what: str = "") -> None:
        elapsed = self._clock() - self._t0
        self.lines.append((elapsed, stage, what))
        text = f"[{elapsed:7.1f}s] {stage}" + (f": {what}" if what else "")
        print(text, file=self._stream, flush=True)
