"""Client-observed unavailability around each fault of a chaos history: how long the producers
could not get a write acknowledged on a partition because of a fault.

    faults = unavailability(history)        # one FaultGaps per fault the nemesis did
    summarize(faults)                       # {"faults": [...], "median_s", "max_s"} for the verdict

For each fault op of the nemesis (the actions that take something away: kill, pause, cut,
kill-leader, pause-followers; not restarts, resumes, heals or delays, and not a fault that
failed) and each partition with acknowledged sends on both sides of it, the gap is the time
from the partition's last acknowledgement at or before the fault to its first one after it
(on the history's monotonic clock). A fault's figure is its worst partition (the partitions
the fault did not touch keep the workload's own pace, a fraction of a second); the run's are
the median and max of those over the faults. It does not judge validity: a gap is what the
run measured, not an anomaly.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deploy.chaos.check.history import History, NemesisValue, OpKind, OpType, SendValue

FAULT_ACTIONS = frozenset({"kill", "pause", "cut", "kill-leader", "pause-followers"})
"""The nemesis actions that take a broker, a controller or a link away."""


@dataclass(frozen=True, slots=True)
class FaultGaps:
    index: int
    """The fault op's index in the history."""
    action: str
    targets: tuple[str, ...]
    ts_ms: int | None
    gaps_s: dict[str, float]
    """Per partition ("topic-partition"): last acknowledgement at or before the fault to the
    first one after it."""

    @property
    def worst_s(self) -> float | None:
        return max(self.gaps_s.values(), default=None)

    def to_json(self) -> dict[str, Any]:
        worst = max(self.gaps_s.items(), key=lambda kv: kv[1], default=(None, None))
        return {
            "index": self.index,
            "action": self.action,
            "targets": list(self.targets),
            "ts_ms": self.ts_ms,
            "partitions": len(self.gaps_s),
            "worst_partition": worst[0],
            "worst_s": worst[1],
            "median_s": statistics.median(self.gaps_s.values()) if self.gaps_s else None,
        }


def _acks(history: History) -> dict[str, list[int]]:
    """Acknowledgement times (ns, ascending) per partition."""
    acks: dict[str, list[int]] = {}
    for op in history.completed(OpKind.SEND, OpType.OK):
        value = op.value
        if isinstance(value, SendValue) and value.partition is not None:
            acks.setdefault(f"{value.topic}-{value.partition}", []).append(op.time_ns)
    for times in acks.values():
        times.sort()
    return acks


def unavailability(history: History) -> list[FaultGaps]:
    acks = _acks(history)
    out = []
    for op in history.ops:
        value = op.value
        if op.kind is not OpKind.NEMESIS or op.error or not isinstance(value, NemesisValue):
            continue
        action = str(value.detail.get("action", ""))
        if action not in FAULT_ACTIONS:
            continue
        gaps = {}
        for tp, times in acks.items():
            i = bisect.bisect_right(times, op.time_ns)
            if 0 < i < len(times):
                gaps[tp] = (times[i] - times[i - 1]) / 1e9
        out.append(FaultGaps(op.index, action, tuple(value.targets), op.ts_ms, gaps))
    return out


def summarize(faults: Sequence[FaultGaps]) -> dict[str, Any]:
    """The verdict's "unavailability": per fault its worst partition, then the run's median and
    max over the faults (None without any)."""
    worst = [w for f in faults if (w := f.worst_s) is not None]
    return {
        "faults": [f.to_json() for f in faults],
        "measured": len(worst),
        "median_s": statistics.median(worst) if worst else None,
        "max_s": max(worst, default=None),
    }


def describe(summary: dict[str, Any]) -> str:
    """One line for the run's summary."""
    if summary["max_s"] is None:
        return "unavailability: no fault with acknowledged writes on both sides"
    return (
        f"unavailability after a fault (its worst partition, from the last acknowledgement "
        f"before to the first after): median {summary['median_s']:.2f} s, max "
        f"{summary['max_s']:.2f} s over {summary['measured']} fault(s)"
    )


__all__ = ["FAULT_ACTIONS", "FaultGaps", "describe", "summarize", "unavailability"]
