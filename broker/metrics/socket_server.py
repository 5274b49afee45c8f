"""Kafka's socket-server-metrics `connection-count` per listener, fed by broker.server, under the
name Strimzi's rules give it (`kafka_server_socket_server_metrics_connection_count{listener}`,
protocol.metric_names) and its "Connection Count per Listener" panel reads.

A connection counts from its accept to its close, its TLS handshake and SASL exchange included
(Kafka's selector holds the channel from its accept). Kafka's MBean has a `networkProcessor`
key as well; trioka has no network processor threads (one event loop serves every listener), so
its series have the listener only (`sum by (listener)` reads both alike). The listeners a
server opens exist at zero from its start.

As the RequestMetrics, these belong to the server (every process that serves requests): one
process-wide instance (`default_socket_server_metrics()`) that every BrokerServer of the process
counts into (a combined node's broker and controller listeners alike); tests pass their own.
"""

from __future__ import annotations

import functools

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from broker.metrics.replica_manager import snapshot
from protocol.bound_view import ScrapeCollector
from protocol.metric_names import CONNECTION_COUNT


def _families() -> tuple[GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            CONNECTION_COUNT,
            "Connections open on a listener, from accept to close (connection-count).",
            labels=["listener"],
        ),
    )


class SocketServerMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.counts: dict[str, int] = {}
        """Listener name -> connections open (changed in the trio thread only)."""
        if registry is not None:
            registry.register(ScrapeCollector(_families, self._fill))

    def _fill(self, families: tuple[GaugeMetricFamily]) -> None:
        (family,) = families
        # The trio thread adds a listener while the scrape's copies: snapshot takes it again.
        for listener, count in sorted(snapshot(self.counts.items)):
            family.add_metric([listener], count)

    def listening(self, listener: str) -> None:
        """A server opens `listener`: its series exists, at zero until a connection comes."""
        self.counts.setdefault(listener, 0)

    def opened(self, listener: str) -> None:
        self.counts[listener] = self.counts.get(listener, 0) + 1

    def closed(self, listener: str) -> None:
        self.counts[listener] -= 1


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_socket_server_metrics() -> SocketServerMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return SocketServerMetrics()
