"""Kafka's kafka.log:type=Log,name=Size{topic,partition}: the bytes of each log on this broker
(every replica it hosts, led or followed: its segments' sizes added up, as Kafka's
UnifiedLog.size), under the jmx_exporter name Strimzi's "Log Size" panel reads
(`kafka_log_log_size`, protocol.metric_names).

Computed at scrape time from what the running broker `bind`s (its LogManager's logs): each
segment keeps its size in memory (`LogSegment.size`, moved by every append, truncation and
roll), so a scrape touches no disk and costs O(logs + segments): at 25,000 logs it is measured
in docs/internals.md ("Metrics"). One series per log, as Kafka's; the list of logs is copied in
one step, and a log deleted meanwhile still answers its last size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from broker.metrics.replica_manager import snapshot
from protocol.bound_view import BoundView, ScrapeCollector
from protocol.metric_names import LOG_SIZE, shipping
from protocol.names import TopicPartition


class LogView(Protocol):
    """What the gauge reads of a log (storage.log.Log)."""

    @property
    def topic_partition(self) -> TopicPartition: ...
    @property
    def size(self) -> int: ...


LogsView = Callable[[], Iterable[LogView]]
"""The logs of the running broker (LogManager.logs)."""


def _families() -> tuple[GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            LOG_SIZE,
            "Bytes of the log of a partition on this broker, its segments added up (Log Size).",
            labels=["topic", "partition"],
        ),
    )


def _fill(logs: LogsView | None, families: tuple[GaugeMetricFamily]) -> None:
    (family,) = families
    if logs is None or shipping.get():  # the telemetry shipper leaves it out: spare the walk
        return
    for log in snapshot(logs):
        tp = log.topic_partition
        family.add_metric([tp.topic, str(tp.partition)], log.size)


class LogMetrics(BoundView[LogsView]):
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__()
        if registry is not None:
            registry.register(ScrapeCollector(_families, lambda f: _fill(self.view(), f)))
