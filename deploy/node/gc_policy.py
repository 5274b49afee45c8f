"""The node processes' garbage-collector policy: freeze what survives a long full collection.

A broker of 25,000 partitions holds millions of long-lived objects (logs, indexes, partition
and replica states), and CPython's full (generation 2) collection walks every one of them:
pauses of 0.4-1.1 s, about 7 s of a broker's minute in a 25,000-partition failover
(bench/run_failover.py, measured with a gc callback), while the event loop serves nothing.
After a full collection that took longer than `freeze_after_s`, its survivors are frozen
(`gc.freeze`): they were just found alive, and later collections skip them, so the next full
collection walks only what was allocated since. Reference counting still frees a frozen
object; what a freeze gives up is collecting cycles among frozen objects that die later.
Each process installs it once at start (`install`); pauses are observed in
`trioka_gc_pause_seconds` (per generation) either way."""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

GC_PAUSES = Histogram(
    "trioka_gc_pause_seconds",
    "Garbage-collector pauses of this process, per generation",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
FREEZE_AFTER_S = 0.05
"""A full collection longer than this freezes its survivors."""
YOUNG_THRESHOLD = 10_000
"""Generation 0's threshold (CPython's default is 700)."""


class GcPolicy:
    def __init__(self, freeze_after_s: float = FREEZE_AFTER_S) -> None:
        self.freeze_after_s = freeze_after_s
        self.freezes = 0
        self._started = 0.0
        self._thresholds = gc.get_threshold()

    def install(self) -> GcPolicy:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        self._thresholds = gc.get_threshold()
        # Young collections every 10,000 net allocations instead of 700: a broker's request
        # turns allocate thousands of short-lived objects, and each young collection that
        # promotes some brings the next full one closer.
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        return self

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
            gc.set_threshold(*self._thresholds)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info["generation"]
        GC_PAUSES.labels(generation=str(generation)).observe(pause)
        if generation == 2 and pause > self.freeze_after_s:
            # After a full collection the survivors are exactly the live objects.
            gc.freeze()
            self.freezes += 1


def install() -> GcPolicy:
    """The policy of a node process (its `start`)."""
    return GcPolicy().install()
