"""structlog configuration: JSON lines with UTC timestamps and the bound node id and role."""

from __future__ import annotations

import io
import json

import structlog

from deploy.telemetry.logs import configure_logging


def test_json_lines_carry_role_node_and_utc_timestamp() -> None:
    out = io.StringIO()
    configure_logging(cache_loggers=False, role="broker", node_id=7, stream=out, json=True)
    structlog.get_logger().info("listening", address="127.0.0.1:9092")
    event = json.loads(out.getvalue().splitlines()[-1])
    assert event["event"] == "listening"
    assert event["role"] == "broker"
    assert event["node_id"] == 7
    assert event["level"] == "info"
    assert event["timestamp"].endswith("Z")


def test_non_tty_defaults_to_json_and_level_filters() -> None:
    out = io.StringIO()
    configure_logging(cache_loggers=False, role="cli", stream=out, level="WARNING")
    log = structlog.get_logger()
    log.info("hidden")
    log.warning("shown")
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["shown"]


def test_process_context_and_topic_partition_fields() -> None:
    out = io.StringIO()
    configure_logging(
        cache_loggers=False,
        role="broker",
        node_id=1,
        stream=out,
        json=True,
        metadata_mode="raft",
        process_roles="broker,controller",
    )
    log = structlog.get_logger()
    log.info("log cleaned", topic_partition="my-topic-12")
    log.info("odd", topic_partition="no partition")
    first, second = (json.loads(line) for line in out.getvalue().splitlines()[-2:])
    assert (first["metadata_mode"], first["process_roles"]) == ("raft", "broker,controller")
    assert (first["topic"], first["partition"], first["topic_partition"]) == (
        "my-topic",
        12,
        "my-topic-12",
    )
    assert "partition" not in second and "topic" not in second
    # Reconfiguring (the chaos runner after the CLI) replaces the process context.
    configure_logging(cache_loggers=False, role="chaos", stream=out, json=True)
    log.info("nemesis")
    third = json.loads(out.getvalue().splitlines()[-1])
    assert third["role"] == "chaos" and "node_id" not in third and "metadata_mode" not in third
