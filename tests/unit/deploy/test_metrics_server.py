"""trioka.metrics.port / trioka.metrics.host and the /metrics server (deploy.telemetry.metrics_server)."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from controller.metrics import default_metrics
from controller.service.driver import ControllerDriver
from deploy.telemetry.metrics_server import serve_metrics
from protocol.config_defs import ConfigError
from raft.local_log import LocalMetadataLog


def test_metrics_config_defaults_and_bounds() -> None:
    c = BrokerConfig.from_values({})
    assert c["trioka.metrics.port"] == -1
    assert c["trioka.metrics.host"] == "127.0.0.1"
    assert BrokerConfig.from_values({"trioka.metrics.port": "0"})["trioka.metrics.port"] == 0
    for bad in ("-2", "65536", "http"):
        with pytest.raises(ConfigError, match=r"trioka\.metrics\.port"):
            BrokerConfig.from_values({"trioka.metrics.port": bad})


def test_port_minus_one_serves_nothing() -> None:
    with serve_metrics(BrokerConfig.from_values({})) as endpoint:
        assert endpoint is None


def test_port_zero_serves_the_process_registry_with_controller_metrics() -> None:
    config = BrokerConfig.from_values({"trioka.metrics.port": 0})
    with serve_metrics(config) as endpoint:
        assert endpoint is not None and endpoint.port > 0
        assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/metrics"
        default_metrics().leader_election_rate_and_time_ms.observe(1.0)
        with urllib.request.urlopen(endpoint.url, timeout=5) as response:
            text = response.read().decode()
    assert "kafka_controller_controllereventmanager_eventqueuesize " in text
    assert "kafka_controller_controllerstats_leaderelectionrateandtimems_count " in text
    assert "process_cpu_seconds_total" in text
    # No _created series: serving turned them off for the process (they were a third of a
    # broker's lines, and Kafka's exporter never had them).
    assert "_created" not in text
    # Closed on exit: nothing listens there any more.
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", endpoint.port), 1):
        pass


def test_a_port_in_use_is_a_clear_config_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = BrokerConfig.from_values({"trioka.metrics.port": port})
        expected = rf"trioka\.metrics\.port: .*127\.0\.0\.1:{port}"
        with pytest.raises(ConfigError, match=expected), serve_metrics(config):
            pass


def test_drivers_of_successive_controller_terms_share_the_process_metrics(tmp_path: Path) -> None:
    # A broker's controller resigns and is elected again: each term builds a new driver on the
    # same process-wide metrics; registering them twice would raise (duplicate timeseries).
    first = ControllerDriver(LocalMetadataLog(str(tmp_path / "a")))
    second = ControllerDriver(LocalMetadataLog(str(tmp_path / "b")))
    assert first._metrics is second._metrics is default_metrics()
