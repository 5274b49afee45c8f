"""The telemetry topics' shape, and when a shipper may create them (pure).

`__trioka_metrics` and `__trioka_logs`: TELEMETRY_PARTITIONS partitions (records are keyed by
source, so each process's records stay in order in one partition), cleanup.policy=delete,
retention.ms 7 days (Kafka's default) and retention.bytes 1 GiB per partition, whichever comes
first. Not Kafka-internal topics (protocol.names.INTERNAL_TOPICS): clients may produce to them.

Replication factor: min(configured, live brokers), where configured is
`trioka.telemetry.replication.factor` (default 3). A 3-broker cluster's brokers start one by
one, so the first shipper up must not create the topics with RF 1: while fewer brokers than
configured are live it waits (records stay in memory or go to the spool), and only after
CREATE_GRACE_S without enough brokers creates them with what there is (a 1- or 2-broker cluster).
"""

from __future__ import annotations

from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC

SHIPPED_TOPICS = (METRICS_TOPIC, LOGS_TOPIC)
TELEMETRY_PARTITIONS = 3
RETENTION_MS = 7 * 24 * 3600 * 1000
RETENTION_BYTES = 1024**3
TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": str(RETENTION_MS),
    "retention.bytes": str(RETENTION_BYTES),
}
CREATE_GRACE_S = 30.0


def creation_replication_factor(configured: int, live_brokers: int, waited_s: float) -> int | None:
    """The replication factor to create the topics with now, or None to wait."""
    if live_brokers < 1:
        return None
    if live_brokers >= configured:
        return configured
    return live_brokers if waited_s >= CREATE_GRACE_S else None
