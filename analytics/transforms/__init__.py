"""Pure DataFrame -> DataFrame transforms behind the report, one module per report section.

Inputs are the typed frames of analytics.schemas: `samples` (one row per metric sample: ts,
ts_ms, source, role, node_id, name, labels, value), `events` (one row per log event: ts, ts_ms,
source, role, node_id, level, event, the catalogued fields of protocol.telemetry.LOG_EVENTS,
record) and `ops` (chaos history ops; see analytics.transforms.failovers for the columns used).

- series: counter increases and rates between consecutive snapshots (Prometheus' rate()),
  gauges, de-duplication of at-least-once deliveries.
- histograms: bucket increases and quantiles (Prometheus' histogram_quantile()).
- throughput, latency, replication, elections, failovers: the report's sections.
"""
