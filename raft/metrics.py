"""KRaft's raft-metrics (kafka.server:type=raft-metrics), prometheus_client style:

- `kafka_server_raft_metrics_commit_latency_ms` (histogram): on the leader, from a proposal's
  acceptance (`RaftDriver.append`) to its commit (KRaft's commit-latency-avg/max);
- `..._current_epoch`, `..._current_leader` (-1: none known), `..._high_watermark`,
  `..._log_end_offset` (gauges, read from the bound driver at scrape time);
- `..._leader_changes_total` (counter): how often this node saw a new leader (a new
  (epoch, leader) pair with a known leader, the first one at start included).

As controller.metrics: one process-wide instance on the global registry (`default_metrics()`),
tests pass their own registry; the running driver binds the gauges (`bind`/`unbind`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "kafka_server_raft_metrics_"
_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class RaftView(Protocol):
    """What the gauges read of a running driver (raft.driver.RaftDriver)."""

    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...


class RaftMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.commit_latency_ms = Histogram(
            PREFIX + "commit_latency_ms",
            "Leader: ms from a proposal's acceptance to its commit (commit-latency).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.leader_changes = Counter(
            PREFIX + "leader_changes",
            "New leaders this node learnt of: a new (epoch, leader) with a known leader.",
            registry=registry,
        )
        self._lock = threading.Lock()
        self._owner: object | None = None
        self._view: RaftView | None = None
        gauges: dict[str, tuple[str, Callable[[RaftView], int]]] = {
            "current_epoch": ("The quorum epoch this node is in (current-epoch).", _epoch),
            "current_leader": ("The leader's id, -1 if none known (current-leader).", _leader),
            "high_watermark": ("The metadata log's high watermark (high-watermark).", _hw),
            "log_end_offset": ("The metadata log's end offset (log-end-offset).", _leo),
        }
        self.gauges: dict[str, Gauge] = {}
        for name, (doc, read) in gauges.items():
            gauge = Gauge(PREFIX + name, doc, registry=registry)
            gauge.set_function(self._reader(read, -1 if name == "current_leader" else 0))
            self.gauges[name] = gauge

    def _reader(self, read: Callable[[RaftView], int], unbound: int) -> Callable[[], float]:
        def value() -> float:
            with self._lock:
                view = self._view
            if view is None:
                return unbound
            try:
                return read(view)
            except RuntimeError:  # the driver is not running (yet, or any more)
                return unbound

        return value

    def bind(self, owner: object, view: RaftView) -> None:
        with self._lock:
            self._owner, self._view = owner, view

    def unbind(self, owner: object) -> None:
        with self._lock:
            if self._owner is owner:
                self._owner = self._view = None


def _epoch(view: RaftView) -> int:
    return view.epoch


def _leader(view: RaftView) -> int:
    return view.leader_id


def _hw(view: RaftView) -> int:
    return view.high_watermark


def _leo(view: RaftView) -> int:
    return view.log_end_offset


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> RaftMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return RaftMetrics()
