"""structlog configuration: JSON lines with UTC timestamps and the bound node id and role."""

from __future__ import annotations

import io
import json

import structlog

from deploy.logging_config import configure_logging


def test_json_lines_carry_role_node_and_utc_timestamp() -> None:
    out = io.StringIO()
    configure_logging(role="broker", node_id=7, stream=out, json=True)
    structlog.get_logger().info("listening", address="127.0.0.1:9092")
    event = json.loads(out.getvalue().splitlines()[-1])
    assert event["event"] == "listening"
    assert event["role"] == "broker"
    assert event["node_id"] == 7
    assert event["level"] == "info"
    assert event["timestamp"].endswith("Z")


def test_non_tty_defaults_to_json_and_level_filters() -> None:
    out = io.StringIO()
    configure_logging(role="cli", stream=out, level="WARNING")
    log = structlog.get_logger()
    log.info("hidden")
    log.warning("shown")
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["shown"]
