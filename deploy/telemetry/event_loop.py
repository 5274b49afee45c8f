"""How idle the process's event loop is: Kafka's `RequestHandlerAvgIdlePercent`
(kafka.server:type=KafkaRequestHandlerPool) and `NetworkProcessorAvgIdlePercent`
(kafka.network:type=SocketServer), under the names Strimzi's rules give them and its dashboard
reads (`kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent`,
`kafka_network_socketserver_networkprocessoravgidle_percent`; protocol.metric_names).

Kafka has pools of request handler and network threads and measures each pool's idle time.
A trioka process has one trio event loop doing both jobs, so both names give the same figure:
the fraction (0 to 1, as Kafka's; the dashboards multiply by 100) of wall time the run loop
spent blocked waiting for I/O, i.e. with no task to run. A trio Instrument stamps the process
clock before and after each wait (`before_io_wait` / `after_io_wait`); a poll that cannot block
(timeout 0: tasks are runnable) is no idle time and is not stamped. The clock is the process's
(protocol.clock, milliseconds): a wait shorter than a millisecond reads 0 or 1 ms depending on
where it falls, which adds up to the right total over the thousands of waits of a window.

The figure covers the window since the newest scrape at least WINDOW_MS old, or since the loop
was watched: with Prometheus scraping every 15-30 s, since its previous scrape; with shorter
intervals, or the telemetry shipper reading as well, a window of WINDOW_MS to twice that. A wait
still in progress counts up to the scrape. What the loop spends waiting for the GIL after its
poll returns (while the metrics server's thread renders a big scrape) is stamped as idle: the
figure reads a little high then. Scrapes run in the metrics server's thread: the loop publishes its state as one tuple
(one attribute store), and the window is behind a lock.

Every process watches its loop for as long as it runs (`watch_event_loop`, in deploy.node's
run_broker and run_controller), on the process-wide metrics (`default_metrics()`); tests pass
their own registry. Unwatched, the gauges have no sample.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import deque
from collections.abc import Iterator

import trio
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from protocol.bound_view import BoundView, ScrapeCollector
from protocol.clock import Clock
from protocol.metric_names import (
    NETWORK_PROCESSOR_AVG_IDLE_PERCENT,
    REQUEST_HANDLER_AVG_IDLE_PERCENT,
)

WINDOW_MS = 10_000
"""The shortest window a figure covers (once the loop has been watched that long)."""
MARK_EVERY_MS = 1_000
"""Scrapes closer than this to the last mark leave none (the marks stay few)."""


class LoopIdleInstrument(trio.abc.Instrument):
    """Adds up the milliseconds the run loop waited for I/O."""

    def __init__(self, clock: Clock) -> None:
        self._now = clock.monotonic_ms
        self._state: tuple[int, int | None] = (0, None)
        """(idle ms of the finished waits, start of the wait in progress or None): one tuple,
        so that another thread never reads one half updated."""
        self._lock = threading.Lock()
        self._marks: deque[tuple[int, int]] = deque([(self._now(), 0)])
        """(time, idle ms) at past scrapes, oldest first: where windows start."""

    def before_io_wait(self, timeout: float) -> None:
        if timeout > 0:
            self._state = (self._state[0], self._now())

    def after_io_wait(self, timeout: float) -> None:
        idle, since = self._state
        if since is not None:
            self._state = (idle + self._now() - since, None)

    def idle_ms(self, now_ms: int) -> int:
        """Idle ms since the start, up to `now_ms` (the wait in progress included)."""
        idle, since = self._state
        return idle if since is None else idle + max(now_ms - since, 0)

    def idle_fraction(self) -> float | None:
        """The idle share of the window ending now (module docstring); None when no time has
        passed since the loop was watched."""
        now = self._now()
        idle = self.idle_ms(now)
        with self._lock:
            marks = self._marks
            while len(marks) > 1 and now - marks[1][0] >= WINDOW_MS:
                marks.popleft()  # marks[0]: the newest mark at least WINDOW_MS old
            start, start_idle = marks[0]
            if now - marks[-1][0] >= MARK_EVERY_MS:
                marks.append((now, idle))
        if now <= start:
            return None
        return min(max((idle - start_idle) / (now - start), 0.0), 1.0)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    doc = (
        "Fraction of wall time the process's event loop waited for I/O, since the last scrape "
        "at least 10 s ago; {} and {} are the same figure (one trio loop does both jobs)."
    )
    names = ("RequestHandlerAvgIdlePercent", "NetworkProcessorAvgIdlePercent")
    return (
        GaugeMetricFamily(REQUEST_HANDLER_AVG_IDLE_PERCENT, doc.format(*names)),
        GaugeMetricFamily(NETWORK_PROCESSOR_AVG_IDLE_PERCENT, doc.format(*reversed(names))),
    )


def _fill(
    instrument: LoopIdleInstrument | None, families: tuple[GaugeMetricFamily, GaugeMetricFamily]
) -> None:
    fraction = instrument.idle_fraction() if instrument is not None else None
    if fraction is not None:
        for family in families:
            family.add_metric([], fraction)


class EventLoopMetrics(BoundView[LoopIdleInstrument]):
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__()
        if registry is not None:
            registry.register(ScrapeCollector(_families, lambda f: _fill(self.view(), f)))


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> EventLoopMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return EventLoopMetrics()


@contextlib.contextmanager
def watch_event_loop(
    clock: Clock, metrics: EventLoopMetrics | None = None
) -> Iterator[LoopIdleInstrument]:
    """Inside trio.run: measure the loop's idle time on `clock` while the block runs and show it
    on `metrics` (the process-wide ones by default)."""
    metrics = metrics if metrics is not None else default_metrics()
    instrument = LoopIdleInstrument(clock)
    trio.lowlevel.add_instrument(instrument)
    metrics.bind(instrument, instrument)
    try:
        yield instrument
    finally:
        metrics.unbind(instrument)
        with contextlib.suppress(KeyError):  # trio drops an instrument that raised
            trio.lowlevel.remove_instrument(instrument)
