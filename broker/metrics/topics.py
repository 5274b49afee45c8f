"""Kafka's BrokerTopicMetrics (kafka.server:type=BrokerTopicMetrics), per topic, under the
jmx_exporter names Kafka dashboards read (protocol.metric_names: `BytesInPerSec` is
`kafka_server_brokertopicmetrics_bytesin_total`).

- `BytesInPerSec{topic}`, `MessagesInPerSec{topic}`: record batches a leader appended for
  producers (the batches' bytes as sent, their records_count headers: never decoded).
- `BytesOutPerSec{topic}`: record bytes sent to consumers (not to followers).
- `ReplicationBytesInPerSec`, `ReplicationBytesOutPerSec`: bytes a follower appended from its
  leader / a leader sent to followers; all topics together, as Kafka's.

Counters (Prometheus' rate() is Kafka's meter), one `inc` per partition append or per response,
through per-topic children looked up once.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from protocol.metric_names import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    REPLICATION_BYTES_IN,
    REPLICATION_BYTES_OUT,
)


class BrokerTopicMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.bytes_in = Counter(
            BYTES_IN,
            "Bytes of record batches appended by this leader for producers (BytesInPerSec).",
            ["topic"],
            registry=registry,
        )
        self.messages_in = Counter(
            MESSAGES_IN,
            "Records appended by this leader for producers (MessagesInPerSec).",
            ["topic"],
            registry=registry,
        )
        self.bytes_out = Counter(
            BYTES_OUT,
            "Record bytes sent to consumers (BytesOutPerSec; followers not counted).",
            ["topic"],
            registry=registry,
        )
        self.replication_bytes_in = Counter(
            REPLICATION_BYTES_IN,
            "Record bytes this broker appended as a follower (ReplicationBytesInPerSec).",
            registry=registry,
        )
        self.replication_bytes_out = Counter(
            REPLICATION_BYTES_OUT,
            "Record bytes sent to followers (ReplicationBytesOutPerSec).",
            registry=registry,
        )
        self._in: dict[str, tuple[Any, Any]] = {}
        self._out: dict[str, Any] = {}

    def appended(self, topic: str, size: int, records: int) -> None:
        """A leader append for a producer: `size` bytes of batches holding `records` records."""
        children = self._in.get(topic)
        if children is None:
            children = (self.bytes_in.labels(topic), self.messages_in.labels(topic))
            self._in[topic] = children
        children[0].inc(size)
        children[1].inc(records)

    def sent_to_consumer(self, topic: str, size: int) -> None:
        child = self._out.get(topic)
        if child is None:
            child = self._out[topic] = self.bytes_out.labels(topic)
        child.inc(size)
