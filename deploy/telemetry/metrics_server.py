"""`/metrics` of a process: prometheus_client's HTTP server on the global registry.

    with serve_metrics(config):      # trioka.metrics.port -1: nothing; 0: a free port
        ...                          # the broker or controller runs; GET http://host:port/metrics

Every process serves it: brokers in each mode and the combined node (deploy.node.broker), and
dedicated Raft controllers (deploy.node.controller; the same two config keys).

The server is prometheus_client's own (a WSGI server in a daemon thread): a scrape never waits
for the trio loop, so it still answers while the broker is busy, and a daemon thread cannot keep
a dying process alive. It serves the process-wide registry (`prometheus_client.REGISTRY`), which
holds the default process/GC/platform collectors and every trioka metric created on it (the
controller's, `controller.metrics.default_metrics()`, created here so that every broker exports
them, not only the active controller) and the broker's, raft's, the server's and the event loop's
(broker.metrics, raft.metrics, deploy.telemetry.event_loop; created by the components that feed
them). The bound address is logged as the `metrics serving`
event (host, port): with port 0 that is how tests, benchmarks and `trioka cluster` learn it.

Names are the jmx_exporter names Kafka dashboards read (protocol.metric_names), and no
`_created` series are exported: `serve_metrics` turns them off for the whole process
(prometheus_client's `disable_created_metrics`, checked at every collect) before the first
scrape. They only held each series' creation time, which Kafka's exporter never had and no
dashboard reads (150 of the 1,405 lines of a broker's scrape in issue 17).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from prometheus_client import REGISTRY, disable_created_metrics, start_http_server

from controller.metrics import default_metrics
from protocol.config_defs import ConfigError

log = structlog.get_logger("deploy.telemetry.metrics_server")

METRICS_PATH = "/metrics"


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{METRICS_PATH}"


class MetricsSettings(Protocol):
    """A process config with `trioka.metrics.port` and `trioka.metrics.host` (BrokerConfig,
    deploy.node.controller_config.ControllerProcessConfig)."""

    def __getitem__(self, key: str) -> Any: ...


@contextlib.contextmanager
def serve_metrics(config: MetricsSettings) -> Iterator[MetricsEndpoint | None]:
    """Serve /metrics while the block runs (None when trioka.metrics.port is -1). Turns the
    process's `_created` series off either way (the shipped snapshots leave them out too)."""
    disable_created_metrics()
    port = int(config["trioka.metrics.port"])
    if port < 0:
        yield None
        return
    host = str(config["trioka.metrics.host"])
    default_metrics()  # the controller's metrics exist (at zero) before any election
    try:
        server, thread = start_http_server(port, addr=host or "0.0.0.0", registry=REGISTRY)
    except OSError as exc:
        raise ConfigError(
            f"trioka.metrics.port: cannot serve /metrics on {host or '0.0.0.0'}:{port}: "
            f"{exc.strerror or exc}"
        ) from None
    endpoint = MetricsEndpoint(host or "0.0.0.0", int(server.server_port))
    log.info("metrics serving", host=endpoint.host, port=endpoint.port, url=endpoint.url)
    try:
        yield endpoint
    finally:
        server.shutdown()  # serve_forever returns; then the socket is closed
        server.server_close()
        thread.join(timeout=5)
