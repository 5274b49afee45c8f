"""KRaft's raft-metrics (kafka.server:type=raft-metrics), under the names Strimzi's
jmx_exporter rules give them and its KRaft dashboard reads (protocol.metric_names:
`kafka_server_raftmetrics_<attribute>`, `-` made `_`):

- `..._current_state{current_state}` (1; the label is KRaft's state name: leader, candidate,
  prospective, voted, follower, observer (a follower that is no voter), unattached, resigned),
  `..._current_leader` (-1: none known), `..._current_vote` (-1: none), `..._current_epoch`,
  `..._high_watermark`, `..._log_end_offset` (gauges, read from the bound driver at scrape
  time);
- `..._commit_latency_avg`, `..._commit_latency_max` (gauges, ms): on the leader, from a
  proposal's acceptance (`RaftDriver.append`) to its commit, over the last two 30 s windows as
  Kafka's sensors (metrics.sample.window.ms, metrics.num.samples); NaN with no commit there;
- trioka's own, beside them: `..._commit_latency_ms` (the histogram of those latencies) and
  `..._leader_changes_total` (counter): how often this node saw a new leader (a new
  (epoch, leader) pair with a known leader, the first one at start included).

As controller.metrics: one process-wide instance on the global registry (`default_metrics()`),
tests pass their own registry; the running driver binds the gauges (`bind`/`unbind`).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from protocol.bound_view import BoundView, ScrapeCollector
from protocol.metric_names import (
    RAFT_COMMIT_LATENCY,
    RAFT_COMMIT_LATENCY_AVG,
    RAFT_COMMIT_LATENCY_MAX,
    RAFT_CURRENT_EPOCH,
    RAFT_CURRENT_LEADER,
    RAFT_CURRENT_STATE,
    RAFT_CURRENT_VOTE,
    RAFT_HIGH_WATERMARK,
    RAFT_LEADER_CHANGES,
    RAFT_LOG_END_OFFSET,
)
from raft.core.types import Role

_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
T = TypeVar("T")
SAMPLE_WINDOW_S = 30.0
"""Kafka's metrics.sample.window.ms default; metrics.num.samples is 2."""


class RaftView(Protocol):
    """What the gauges read of a running driver (raft.driver.RaftDriver)."""

    @property
    def role(self) -> Role: ...
    @property
    def is_voter(self) -> bool: ...
    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def voted_for(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...


def current_state(view: RaftView) -> str:
    """KRaft's current-state name (KafkaRaftMetrics): a follower that is no voter (a broker
    following the metadata log) is an observer."""
    role = view.role
    if role is Role.FOLLOWER and not view.is_voter:
        return "observer"
    return role.value


class WindowedStat:
    """Kafka's Avg and Max sensors: samples of `window_s` each, the last `samples` of them
    counted (older ones purged), NaN when none holds a value. Thread-safe (recorded in trio's
    thread, read by the scrape's)."""

    def __init__(
        self,
        window_s: float = SAMPLE_WINDOW_S,
        samples: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._samples: deque[list[float]] = deque(maxlen=samples)
        """[start, count, total, max] per window, oldest first."""

    def record(self, value: float) -> None:
        now = self.clock()
        with self._lock:
            if not self._samples or now - self._samples[-1][0] >= self.window_s:
                self._samples.append([now, 0.0, 0.0, -math.inf])
            current = self._samples[-1]
            current[1] += 1
            current[2] += value
            current[3] = max(current[3], value)

    def read(self) -> tuple[float, float]:
        """(avg, max) over the windows still counted."""
        now = self.clock()
        horizon = self.window_s * (self._samples.maxlen or 1)
        with self._lock:
            live = [s for s in self._samples if now - s[0] < horizon]
        count = sum(s[1] for s in live)
        if not count:
            return math.nan, math.nan
        return sum(s[2] for s in live) / count, max(s[3] for s in live)


def _state_families() -> tuple[GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            RAFT_CURRENT_STATE,
            "1, labelled with this node's quorum state (current-state).",
            labels=["current_state"],
        ),
    )


def _fill_state(state: str | None, families: tuple[GaugeMetricFamily]) -> None:
    if state is not None:
        families[0].add_metric([state], 1)


class RaftMetrics(BoundView["RaftView"]):
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__()
        self.commit_latency_ms = Histogram(
            RAFT_COMMIT_LATENCY,
            "Leader: ms from a proposal's acceptance to its commit (the distribution behind "
            "commit-latency-avg/max).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.commit_latency = WindowedStat()
        self.leader_changes = Counter(
            RAFT_LEADER_CHANGES,
            "New leaders this node learnt of: a new (epoch, leader) with a known leader.",
            registry=registry,
        )
        gauges: dict[str, tuple[str, Callable[[], float]]] = {
            RAFT_CURRENT_EPOCH: (
                "The quorum epoch this node is in (current-epoch).",
                self._reader(_epoch, 0),
            ),
            RAFT_CURRENT_LEADER: (
                "The leader's id, -1 if none known (current-leader).",
                self._reader(_leader, -1),
            ),
            RAFT_CURRENT_VOTE: (
                "The voter this node voted for in this epoch, -1 if none (current-vote).",
                self._reader(_vote, -1),
            ),
            RAFT_HIGH_WATERMARK: (
                "The metadata log's high watermark (high-watermark).",
                self._reader(_hw, 0),
            ),
            RAFT_LOG_END_OFFSET: (
                "The metadata log's end offset (log-end-offset).",
                self._reader(_leo, 0),
            ),
            RAFT_COMMIT_LATENCY_AVG: (
                "Leader: mean ms from a proposal's acceptance to its commit, last 30-60 s "
                "(commit-latency-avg).",
                lambda: self.commit_latency.read()[0],
            ),
            RAFT_COMMIT_LATENCY_MAX: (
                "Leader: max ms from a proposal's acceptance to its commit, last 30-60 s "
                "(commit-latency-max).",
                lambda: self.commit_latency.read()[1],
            ),
        }
        self.gauges: dict[str, Gauge] = {}
        for name, (doc, value) in gauges.items():
            gauge = Gauge(name, doc, registry=registry)
            gauge.set_function(value)
            self.gauges[name] = gauge
        if registry is not None:
            registry.register(
                ScrapeCollector(
                    _state_families, lambda f: _fill_state(self.read(current_state, None), f)
                )
            )

    def observe_commit(self, latency_ms: float) -> None:
        """One proposal committed `latency_ms` after its acceptance (the leader)."""
        self.commit_latency_ms.observe(latency_ms)
        self.commit_latency.record(latency_ms)

    def read(self, read: Callable[[RaftView], T], unbound: T) -> T:
        """`read(view)` of the bound driver; `unbound` when none is bound or running."""
        view = self.view()
        if view is None:
            return unbound
        try:
            return read(view)
        except RuntimeError:  # the driver is not running (yet, or any more)
            return unbound

    def _reader(self, read: Callable[[RaftView], int], unbound: int) -> Callable[[], float]:
        return lambda: self.read(read, unbound)


def _epoch(view: RaftView) -> int:
    return view.epoch


def _leader(view: RaftView) -> int:
    return view.leader_id


def _vote(view: RaftView) -> int:
    return view.voted_for


def _hw(view: RaftView) -> int:
    return view.high_watermark


def _leo(view: RaftView) -> int:
    return view.log_end_offset


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> RaftMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return RaftMetrics()
