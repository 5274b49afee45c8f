"""The telemetry shipper (issue 7; docs/telemetry.md): every process ships its metrics snapshots
and its log events to `__trioka_metrics` / `__trioka_logs` (protocol/telemetry.py), through a
bounded in-memory buffer, and to a bounded local JSONL spool while the cluster cannot take them.

Pure parts: `buffer` (what the log tee fills), `spool` (append-only JSONL files and the drain
position), `policy` (batching and retry backoff), `snapshot` (prometheus registry -> samples).
The trio driver is `shipper.TelemetryShipper`; `tee.LOG_TEE` is the structlog processor that
deploy.telemetry.logs puts in every process's chain.
"""
