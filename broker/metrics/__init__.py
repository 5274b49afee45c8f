"""The broker's metrics, Kafka's, under the jmx_exporter names Kafka dashboards read
(prometheus_client, names from protocol.metric_names; see docs/internals.md, "Metrics"):
`BrokerMetrics` groups BrokerTopicMetrics, the ReplicaManager / purgatory / fetcher-lag metrics,
the consumer group lag and the log sizes of one broker; RequestMetrics and the
socket-server-metrics belong to the server (every process that serves requests, dedicated
controllers included).

As controller.metrics: one process-wide instance on the global registry (`default_metrics()`,
served on /metrics by deploy.telemetry.metrics_server); tests pass their own CollectorRegistry.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry

from broker.metrics.consumer_groups import ConsumerGroupMetrics, GroupOffsetsView
from broker.metrics.logs import LogMetrics
from broker.metrics.replica_manager import BrokerView, ReplicaManagerMetrics
from broker.metrics.requests import (
    RequestMetrics,
    RequestTiming,
    awaiting_remote,
    default_request_metrics,
)
from broker.metrics.topics import BrokerTopicMetrics

__all__ = [
    "BrokerMetrics",
    "BrokerTopicMetrics",
    "BrokerView",
    "ConsumerGroupMetrics",
    "GroupOffsetsView",
    "LogMetrics",
    "ReplicaManagerMetrics",
    "RequestMetrics",
    "RequestTiming",
    "awaiting_remote",
    "default_metrics",
    "default_request_metrics",
]


@dataclass(frozen=True, slots=True)
class BrokerMetrics:
    topics: BrokerTopicMetrics
    replica_manager: ReplicaManagerMetrics
    consumer_groups: ConsumerGroupMetrics
    logs: LogMetrics

    @classmethod
    def create(cls, registry: CollectorRegistry | None = REGISTRY) -> BrokerMetrics:
        return cls(
            BrokerTopicMetrics(registry),
            ReplicaManagerMetrics(registry),
            ConsumerGroupMetrics(registry),
            LogMetrics(registry),
        )


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> BrokerMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return BrokerMetrics.create()
