"""The shipper's own metrics (prometheus_client's global registry, hence on /metrics and in the
snapshots it ships): records per topic shipped to the cluster, written to the spool, dropped at
a bound (the in-memory buffer, the spool's max bytes, or a record too large to produce)."""

from __future__ import annotations

from prometheus_client import Counter

RECORDS_SHIPPED = Counter(
    "trioka_telemetry_records_shipped",
    "Telemetry records the cluster acknowledged (acks=all), per topic",
    ["topic"],
)
RECORDS_SPOOLED = Counter(
    "trioka_telemetry_records_spooled",
    "Telemetry records written to the local spool because the cluster could not take them",
    ["topic"],
)
RECORDS_DROPPED = Counter(
    "trioka_telemetry_records_dropped",
    "Telemetry records dropped at a bound (memory buffer, spool max bytes, record too large)",
    ["topic"],
)
