"""The controller's metrics, with Kafka's names (kafka.controller:type=ControllerEventManager).

Metrics live in a prometheus_client registry; the default instance is created once per process
on the global registry (served on /metrics by deploy.metrics_server), tests pass their own
registry. Every ControllerDriver without an explicit `metrics` shares that one instance: a ZK-mode
broker builds a new driver each time it is elected, and registering the same names again on one
registry would raise (duplicated timeseries), so terms reuse, never re-create, the metrics.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram

_MS_BUCKETS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
PREFIX = "kafka_controller_ControllerEventManager_"
STATS_PREFIX = "kafka_controller_ControllerStats_"


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.event_queue_size = Gauge(
            PREFIX + "EventQueueSize",
            "Events waiting in the controller's queue (EventQueueSize).",
            registry=registry,
        )
        self.event_queue_time_ms = Histogram(
            PREFIX + "EventQueueTimeMs",
            "Time events waited in the controller's queue, ms (EventQueueTimeMs).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.event_queue_processing_time_ms = Histogram(
            PREFIX + "EventQueueProcessingTimeMs",
            "Time the controller took to process an event, including the wait for its records "
            "to commit, ms (EventQueueProcessingTimeMs).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.leader_election_rate_and_time_ms = Histogram(
            STATS_PREFIX + "LeaderElectionRateAndTimeMs",
            "Time an event that elects leaders (broker change, controlled shutdown, "
            "ElectLeaders, rebalance) took from the election to the commit of its records, ms; "
            "the count gives the rate (LeaderElectionRateAndTimeMs).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )


_default: ControllerMetrics | None = None


def default_metrics() -> ControllerMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    global _default
    if _default is None:
        _default = ControllerMetrics()
    return _default
