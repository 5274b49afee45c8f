"""Consumer group lag, exported by the broker that coordinates the group (Redpanda exports it
the same way since its users asked for it; Kafka leaves it to an exporter beside the cluster).

Names and labels are the Kafka Exporter's (protocol.metric_names), so that the dashboards and
alerts written for it (Strimzi's strimzi-kafka-exporter.json among them) read trioka's:

- `kafka_consumergroup_current_offset{consumergroup,topic,partition}`: the committed offset;
- `kafka_consumergroup_lag{consumergroup,topic,partition}`: the partition's high watermark minus
  the committed offset (never below 0: a commit may name an offset past the high watermark);
- `kafka_consumergroup_lag_sum{consumergroup,topic}`: the group's lag over a topic's partitions
  (the Kafka Exporter's labels; `sum by (consumergroup)` is Redpanda's per-group sum);
- `kafka_consumergroup_lag_max{consumergroup}`: the group's largest partition lag (Redpanda's
  `redpanda_kafka_consumer_group_lag_max`, under the Kafka Exporter's prefix).

Computed at scrape time (nothing on the commit or produce path) from what the running broker
`bind`s: the committed offsets of the groups its coordinator serves (the groups of the
`__consumer_offsets` partitions it leads, once loaded) and the high watermark of the partitions
it hosts. Which high watermark: the one this broker holds, with no request sent at scrape
time. A partition it leads: its own, exact; one it follows: the leader's as of its last fetch
answer (Kafka's follower high watermark, behind by at most a fetch round trip). A partition
with a commit that this broker does not host has no series (rather than a wrong one): in the
local and compose clusters (3 brokers, replication factor 3) every broker hosts every
partition; on a larger cluster run an exporter that asks every leader, or read the lag the
consumers report. The scrape runs in the metrics server's thread: the dicts are copied first
(`replica_manager.snapshot`, again if trio resized one meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from broker.metrics.replica_manager import snapshot
from protocol.bound_view import BoundView, ScrapeCollector
from protocol.metric_names import (
    CONSUMERGROUP_CURRENT_OFFSET,
    CONSUMERGROUP_LAG,
    CONSUMERGROUP_LAG_MAX,
    CONSUMERGROUP_LAG_SUM,
)
from protocol.names import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupOffsetsView:
    """What a running broker hands the collector (callables, read at scrape time)."""

    committed: Callable[[], Iterable[tuple[str, TopicPartition, int]]]
    """(group, partition, committed offset) of every group this broker coordinates."""
    high_watermark: Callable[[TopicPartition], int | None]
    """The high watermark of a partition hosted here; None when it is not."""


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    tp: TopicPartition
    committed: int
    lag: int


def partition_lags(view: GroupOffsetsView) -> list[PartitionLag]:
    """The lag of every committed partition whose high watermark this broker knows."""
    out = []
    for group, tp, offset in snapshot(view.committed):
        if offset < 0:  # a commit of "no position" (-1): nothing to measure against
            continue
        hw = view.high_watermark(tp)
        if hw is not None:
            out.append(PartitionLag(group, tp, offset, max(hw - offset, 0)))
    return out


def _families() -> tuple[GaugeMetricFamily, ...]:
    return (
        GaugeMetricFamily(
            CONSUMERGROUP_CURRENT_OFFSET,
            "Committed offset of a consumer group, per partition (groups coordinated here).",
            labels=["consumergroup", "topic", "partition"],
        ),
        GaugeMetricFamily(
            CONSUMERGROUP_LAG,
            "High watermark minus the group's committed offset, per partition hosted here "
            "(groups coordinated here).",
            labels=["consumergroup", "topic", "partition"],
        ),
        GaugeMetricFamily(
            CONSUMERGROUP_LAG_SUM,
            "The group's lag summed over a topic's partitions (those of kafka_consumergroup_lag).",
            labels=["consumergroup", "topic"],
        ),
        GaugeMetricFamily(
            CONSUMERGROUP_LAG_MAX,
            "The group's largest partition lag (of those of kafka_consumergroup_lag).",
            labels=["consumergroup"],
        ),
    )


def _fill(view: GroupOffsetsView | None, families: tuple[GaugeMetricFamily, ...]) -> None:
    offset, lag, lag_sum, lag_max = families
    sums: dict[tuple[str, str], int] = {}
    maxima: dict[str, int] = {}
    for p in partition_lags(view) if view is not None else ():
        labels = [p.group, p.tp.topic, str(p.tp.partition)]
        offset.add_metric(labels, p.committed)
        lag.add_metric(labels, p.lag)
        sums[(p.group, p.tp.topic)] = sums.get((p.group, p.tp.topic), 0) + p.lag
        maxima[p.group] = max(maxima.get(p.group, 0), p.lag)
    for (group, topic), total in sorted(sums.items()):
        lag_sum.add_metric([group, topic], total)
    for group, most in sorted(maxima.items()):
        lag_max.add_metric([group], most)


class ConsumerGroupMetrics(BoundView["GroupOffsetsView"]):
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__()
        if registry is not None:
            registry.register(ScrapeCollector(_families, lambda f: _fill(self.view(), f)))
