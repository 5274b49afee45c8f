"""Kafka's ReplicaManager, DelayedOperationPurgatory and FetcherLagMetrics metrics, under the
jmx_exporter names Kafka dashboards read (protocol.metric_names: `UnderReplicatedPartitions` is
`kafka_server_replicamanager_underreplicatedpartitions`, `IsrShrinksPerSec` is
`kafka_server_replicamanager_isrshrinks_total`).

Gauges are computed at scrape time (no cost on the request path) from what the running broker
`bind`s: its partitions' states, its purgatories' sizes and its replica fetchers' lags. A scrape
runs in the metrics server's thread while trio changes those structures, so each is copied
first (`list(...)` of a dict is one step under the GIL) and a copy that raced a resize is taken
again.

- kafka.server:type=ReplicaManager: `UnderReplicatedPartitions` (led here, ISR smaller than the
  assignment), `UnderMinIsrPartitionCount` (led here, ISR below min(min.insync.replicas, RF)),
  `AtMinIsrPartitionCount`, `LeaderCount`, `PartitionCount` (hosted, led or followed);
  counters `IsrShrinksPerSec`, `IsrExpandsPerSec`: ISR changes this broker proposed as leader
  and the controller committed (as Kafka's, marked on the AlterPartition answer; an ISR the
  controller changes by itself, e.g. when it fences a dead broker, is not counted here).
- kafka.server:type=DelayedOperationPurgatory: `PurgatorySize{delayedOperation}`: requests
  parked (Produce: acks=all and the group coordinator's offset commits; Fetch: long polls).
- kafka.server:type=FetcherLagMetrics: `ConsumerLag{clientId,topic,partition}`: per followed
  partition, the leader's high watermark minus this follower's log end offset at its last fetch
  answer; clientId is Kafka's name of the fetcher (`ReplicaFetcherThread-<fetcher>-<leader>`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from protocol.bound_view import BoundView
from protocol.metric_names import (
    AT_MIN_ISR_PARTITION_COUNT,
    FETCHER_CONSUMER_LAG,
    ISR_EXPANDS,
    ISR_SHRINKS,
    LEADER_COUNT,
    PARTITION_COUNT,
    PURGATORY_SIZE,
    UNDER_MIN_ISR_PARTITION_COUNT,
    UNDER_REPLICATED_PARTITIONS,
)
from protocol.names import TopicPartition

T = TypeVar("T")


class PartitionView(Protocol):
    """What the gauges read of a partition's state (broker.replica's PartitionState)."""

    @property
    def is_leader(self) -> bool: ...
    @property
    def is_under_replicated(self) -> bool: ...
    @property
    def is_under_min_isr(self) -> bool: ...
    @property
    def is_at_min_isr(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class BrokerView:
    """What a running broker hands the gauges (callables, read at scrape time)."""

    partitions: Callable[[], Iterable[PartitionView]]
    purgatory_sizes: Mapping[str, Callable[[], int]]
    fetcher_lags: Callable[[], Iterable[tuple[str, TopicPartition, int]]]
    """(clientId, partition, lag) per followed partition (broker.fetcher's `lags`)."""


def snapshot(fn: Callable[[], Iterable[T]], attempts: int = 5) -> list[T]:
    """`list(fn())`, again if trio resized what it walks meanwhile."""
    for _ in range(attempts - 1):
        try:
            return list(fn())
        except RuntimeError:  # "dictionary changed size during iteration"
            continue
    return list(fn())


_GAUGES = {
    "UnderReplicatedPartitions": "Partitions led here whose ISR is smaller than their replicas.",
    "UnderMinIsrPartitionCount": "Partitions led here whose ISR is below min.insync.replicas.",
    "AtMinIsrPartitionCount": "Partitions led here whose ISR is exactly min.insync.replicas.",
    "LeaderCount": "Partitions led by this broker.",
    "PartitionCount": "Partitions hosted by this broker (led or followed).",
}
_GAUGE_NAMES = {
    "UnderReplicatedPartitions": UNDER_REPLICATED_PARTITIONS,
    "UnderMinIsrPartitionCount": UNDER_MIN_ISR_PARTITION_COUNT,
    "AtMinIsrPartitionCount": AT_MIN_ISR_PARTITION_COUNT,
    "LeaderCount": LEADER_COUNT,
    "PartitionCount": PARTITION_COUNT,
}


class _Collector(Collector):
    def __init__(self, owner: ReplicaManagerMetrics) -> None:
        self.owner = owner

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return self._families(None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return self._families(self.owner.view())

    def _families(self, view: BrokerView | None) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(_GAUGES, 0)
        if view is not None:
            for state in snapshot(view.partitions):
                counts["PartitionCount"] += 1
                if not state.is_leader:
                    continue
                counts["LeaderCount"] += 1
                counts["UnderReplicatedPartitions"] += state.is_under_replicated
                counts["UnderMinIsrPartitionCount"] += state.is_under_min_isr
                counts["AtMinIsrPartitionCount"] += state.is_at_min_isr
        for name, doc in _GAUGES.items():
            yield GaugeMetricFamily(_GAUGE_NAMES[name], f"{doc} ({name})", value=counts[name])
        purgatory = GaugeMetricFamily(
            PURGATORY_SIZE,
            "Requests parked in the purgatory (PurgatorySize).",
            labels=["delayedOperation"],
        )
        lag = GaugeMetricFamily(
            FETCHER_CONSUMER_LAG,
            "Leader's high watermark minus this follower's log end offset, per followed "
            "partition, at the last fetch (FetcherLagMetrics ConsumerLag).",
            labels=["clientId", "topic", "partition"],
        )
        if view is not None:
            for operation, size in view.purgatory_sizes.items():
                purgatory.add_metric([operation], size())
            for client_id, tp, value in snapshot(view.fetcher_lags):
                lag.add_metric([client_id, tp.topic, str(tp.partition)], value)
        yield purgatory
        yield lag


class ReplicaManagerMetrics(BoundView["BrokerView"]):
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__()
        self.isr_shrinks = Counter(
            ISR_SHRINKS,
            "ISR shrinks this broker proposed as leader and the controller committed "
            "(IsrShrinksPerSec).",
            registry=registry,
        )
        self.isr_expands = Counter(
            ISR_EXPANDS,
            "ISR expansions this broker proposed as leader and the controller committed "
            "(IsrExpandsPerSec).",
            registry=registry,
        )
        if registry is not None:
            registry.register(_Collector(self))
