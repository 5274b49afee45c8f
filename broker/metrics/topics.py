"""Kafka's BrokerTopicMetrics (kafka.server:type=BrokerTopicMetrics), per topic, under the
jmx_exporter names Kafka dashboards read (protocol.metric_names: `BytesInPerSec` is
`kafka_server_brokertopicmetrics_bytesin_total`).

- `BytesInPerSec{topic}`, `MessagesInPerSec{topic}`: record batches a leader appended for
  producers (the batches' bytes as sent, their records_count headers: never decoded).
- `BytesOutPerSec{topic}`: record bytes sent to consumers (not to followers).
- `ReplicationBytesInPerSec`, `ReplicationBytesOutPerSec`: bytes a follower appended from its
  leader / a leader sent to followers; all topics together, as Kafka's.
- `TotalProduceRequestsPerSec{topic}`, `FailedProduceRequestsPerSec{topic}`: where Kafka's
  ReplicaManager.appendToLocalLog marks them, per partition of a Produce that reached the append
  (acks valid); failed: its append raised an error Kafka does not leave out
  (`PRODUCE_NOT_FAILED`: those are the client's or the cluster's state, not a broker failure),
  e.g. NOT_ENOUGH_REPLICAS, INVALID_RECORD, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_SERVER_ERROR.
- `TotalFetchRequestsPerSec{topic}`: as Kafka's ReplicaManager.fetchMessages, once per partition
  of a Fetch, consumers' and followers' alike (a follower's incremental fetch counts every
  partition of its session, as Kafka's reads them all); `FailedFetchRequestsPerSec{topic}`: a
  partition read that failed with an error not in `FETCH_NOT_FAILED` (Kafka's readFromLog).

A partition this broker does not host (UNKNOWN_TOPIC_OR_PARTITION) is counted in neither: Kafka
answers a topic its metadata does not know before ReplicaManager counts anything, and a name a
client typed must not make a series. Where this differs from Kafka: trioka gives the same answer
for a partition of a known topic that is hosted elsewhere, which Kafka answers
NOT_LEADER_OR_FOLLOWER and counts in Total; so produces and consumer fetches sent on stale
metadata (after a reassignment) are not counted. A follower session's partitions are all
counted (broker.handlers.fetch_totals).

Counters (Prometheus' rate() is Kafka's meter), one `inc` per partition append or per response,
through per-topic children looked up once. A topic's series go when the broker hosts none of its
partitions any more (`remove_topic`, as Kafka's ReplicaManager.maybeRemoveTopicMetrics), so
topics created and deleted do not pile up series.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from protocol.errors import ErrorCode
from protocol.metric_names import (
    BYTES_IN,
    BYTES_OUT,
    FAILED_FETCH_REQUESTS,
    FAILED_PRODUCE_REQUESTS,
    MESSAGES_IN,
    REPLICATION_BYTES_IN,
    REPLICATION_BYTES_OUT,
    TOTAL_FETCH_REQUESTS,
    TOTAL_PRODUCE_REQUESTS,
)

NOT_HOSTED = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
"""Counted in neither Total nor Failed (module docstring)."""
PRODUCE_NOT_FAILED = frozenset(
    int(code)
    for code in (
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,  # RecordTooLargeException
        ErrorCode.RECORD_LIST_TOO_LARGE,  # RecordBatchTooLargeException
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INVALID_TOPIC_EXCEPTION,  # a produce to an internal topic, refused
    )
)
"""Kafka's appendToLocalLog: errors that do not mark FailedProduceRequestsPerSec."""
FETCH_NOT_FAILED = frozenset(
    int(code)
    for code in (
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.OFFSET_OUT_OF_RANGE,  # without tiered storage, as trioka
    )
)
"""Kafka's readFromLog: errors that do not mark FailedFetchRequestsPerSec."""


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
        self.total_produce_requests = Counter(
            TOTAL_PRODUCE_REQUESTS,
            "Partitions of Produce requests that reached the append (TotalProduceRequestsPerSec).",
            ["topic"],
            registry=registry,
        )
        self.failed_produce_requests = Counter(
            FAILED_PRODUCE_REQUESTS,
            "Partitions of Produce requests whose append failed, errors Kafka leaves out not "
            "counted (FailedProduceRequestsPerSec).",
            ["topic"],
            registry=registry,
        )
        self.total_fetch_requests = Counter(
            TOTAL_FETCH_REQUESTS,
            "Partitions of Fetch requests, consumers' and followers' (TotalFetchRequestsPerSec).",
            ["topic"],
            registry=registry,
        )
        self.failed_fetch_requests = Counter(
            FAILED_FETCH_REQUESTS,
            "Partition reads of Fetch requests that failed, errors Kafka leaves out not counted "
            "(FailedFetchRequestsPerSec).",
            ["topic"],
            registry=registry,
        )
        self._in: dict[str, tuple[Any, Any]] = {}
        self._out: dict[str, Any] = {}
        self._produce: dict[str, tuple[Any, Any]] = {}
        self._fetch: dict[str, tuple[Any, Any]] = {}

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

    def produced(self, topic: str, error_code: int) -> None:
        """One partition of a Produce reached the append and was answered `error_code`."""
        if error_code == NOT_HOSTED:
            return
        children = self._produce.get(topic)
        if children is None:
            children = self._produce[topic] = (
                self.total_produce_requests.labels(topic),
                self.failed_produce_requests.labels(topic),
            )
        children[0].inc()
        if error_code not in PRODUCE_NOT_FAILED:
            children[1].inc()

    def fetched(self, partitions_per_topic: Mapping[str, int]) -> None:
        """One Fetch (or several of a follower's session) named that many partitions of each
        topic."""
        for topic, count in partitions_per_topic.items():
            self._fetch_children(topic)[0].inc(count)

    def remove_topic(self, topic: str) -> None:
        """Forget `topic`'s series: this broker hosts none of its partitions any more."""
        for cache in (self._in, self._out, self._produce, self._fetch):
            cache.pop(topic, None)
        for family in (
            self.bytes_in,
            self.messages_in,
            self.bytes_out,
            self.total_produce_requests,
            self.failed_produce_requests,
            self.total_fetch_requests,
            self.failed_fetch_requests,
        ):
            with contextlib.suppress(KeyError):  # never had a series of it
                family.remove(topic)

    def fetch_read(self, topic: str, error_code: int) -> None:
        """A partition read for a Fetch answered `error_code`: counts the failures."""
        if error_code not in FETCH_NOT_FAILED and error_code != NOT_HOSTED:
            self._fetch_children(topic)[1].inc()

    def _fetch_children(self, topic: str) -> tuple[Any, Any]:
        children = self._fetch.get(topic)
        if children is None:
            children = self._fetch[topic] = (
                self.total_fetch_requests.labels(topic),
                self.failed_fetch_requests.labels(topic),
            )
        return children
