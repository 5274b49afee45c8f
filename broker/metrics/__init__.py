"""The broker's metrics, with Kafka's names (prometheus_client; see docs/internals.md,
"Metrics"): `BrokerMetrics` groups BrokerTopicMetrics and the ReplicaManager / purgatory /
fetcher-lag metrics of one broker; RequestMetrics belong to the server (every process that
serves requests, dedicated controllers included).

As controller.metrics: one process-wide instance on the global registry (`default_metrics()`,
served on /metrics by deploy.telemetry.metrics_server); tests pass their own CollectorRegistry.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry

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

    @classmethod
    def create(cls, registry: CollectorRegistry | None = REGISTRY) -> BrokerMetrics:
        return cls(BrokerTopicMetrics(registry), ReplicaManagerMetrics(registry))


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> BrokerMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return BrokerMetrics.create()
