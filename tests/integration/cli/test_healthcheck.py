"""deploy.docker.healthcheck (the compose services' HEALTHCHECK) against a real broker process."""

from __future__ import annotations

import subprocess
import sys

from tests.support.broker_process import BrokerProcess


def healthcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deploy.docker.healthcheck", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_live_broker_is_healthy_for_its_own_id_only(broker: BrokerProcess) -> None:
    assert healthcheck("broker", broker.bootstrap, "1").returncode == 0
    other = healthcheck("broker", broker.bootstrap, "7")
    assert other.returncode == 1
    assert "broker 7 is not among the live brokers [1]" in other.stderr


def test_nothing_listening_is_unhealthy_and_bad_arguments_are_usage_errors() -> None:
    down = healthcheck("broker", "127.0.0.1:1", "1")
    assert down.returncode == 1 and "unhealthy" in down.stderr
    assert healthcheck("controller", "127.0.0.1:1").returncode == 1
    usage = healthcheck("broker", "127.0.0.1:1", "one")
    assert usage.returncode == 2 and "usage:" in usage.stderr
