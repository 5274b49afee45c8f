"""The shipper's settings, from a broker's or a controller's config (same keys, same defaults).

- `metrics.interval.ms` (default 10000): how often a process ships a metrics snapshot. trioka's
  name (the issue's); Kafka's nearest is metrics.sample.window.ms, which is something else (the
  window of its rate samples).
- `trioka.telemetry.enable` (default true): ship at all.
- `trioka.telemetry.spool.dir` (default `<log.dirs[0]>/telemetry-spool`, a controller's
  `<metadata.log.dir>/telemetry-spool`) and `trioka.telemetry.spool.max.bytes` (default 100 MiB).
- `trioka.telemetry.bootstrap.servers` (default: none): where to ship. Empty: a broker ships to
  its own listener (hence its own cluster), a controller to the brokers registered in its
  metadata image.
- `trioka.telemetry.security.protocol`, `trioka.telemetry.ssl.*`, `trioka.telemetry.sasl.*`:
  the shipping client's security, Kafka's client keys under the prefix (unset: the client's
  defaults, PLAINTEXT).
- `trioka.telemetry.replication.factor` (default 3, as offsets.topic.replication.factor): the
  telemetry topics are created with min(this, live brokers) once that many brokers are live, or
  with what there is after CREATE_GRACE_S (telemetry.topics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.server_configs import TELEMETRY_CLIENT_KEYS, TELEMETRY_CLIENT_PREFIX
from protocol.telemetry import SPOOL_DIR_NAME

TELEMETRY_KEYS = (
    "metrics.interval.ms",
    "trioka.telemetry.enable",
    "trioka.telemetry.spool.dir",
    "trioka.telemetry.spool.max.bytes",
    "trioka.telemetry.bootstrap.servers",
    "trioka.telemetry.replication.factor",
    *(TELEMETRY_CLIENT_PREFIX + key for key, _ in TELEMETRY_CLIENT_KEYS),
)


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    enable: bool
    interval_s: float
    spool_dir: Path
    spool_max_bytes: int
    bootstrap_servers: tuple[str, ...]
    replication_factor: int
    client: Mapping[str, str]
    """The shipping clients' security settings (Kafka's client keys), those set only."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any], data_dir: str | Path) -> TelemetrySettings:
        """From a resolved config (`values` has every TELEMETRY_KEYS key); `data_dir` is where
        the default spool directory goes (a broker's first log dir, a controller's metadata
        log dir)."""
        spool_dir = str(values["trioka.telemetry.spool.dir"]) or str(
            Path(data_dir) / SPOOL_DIR_NAME
        )
        return cls(
            enable=bool(values["trioka.telemetry.enable"]),
            interval_s=int(values["metrics.interval.ms"]) / 1000,
            spool_dir=Path(spool_dir),
            spool_max_bytes=int(values["trioka.telemetry.spool.max.bytes"]),
            bootstrap_servers=tuple(values["trioka.telemetry.bootstrap.servers"]),
            replication_factor=int(values["trioka.telemetry.replication.factor"]),
            client={
                key: str(values[TELEMETRY_CLIENT_PREFIX + key])
                for key, _ in TELEMETRY_CLIENT_KEYS
                if values[TELEMETRY_CLIENT_PREFIX + key]
            },
        )
