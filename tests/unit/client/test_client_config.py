from __future__ import annotations

import pytest

from client.config import admin_config, consumer_config, parse_host_port, producer_config
from protocol.config_defs import ConfigError


def test_producer_defaults_are_kafkas() -> None:
    c = producer_config()
    assert c["acks"] == -1
    assert c["batch.size"] == 16384
    assert c["linger.ms"] == 5
    assert c["buffer.memory"] == 33554432
    assert c["max.block.ms"] == 60000
    assert c["compression.type"] == "none"
    assert c["retry.backoff.ms"] == 100
    assert c["retry.backoff.max.ms"] == 1000
    assert c["delivery.timeout.ms"] == 120000
    assert c["request.timeout.ms"] == 30000
    assert c["max.in.flight.requests.per.connection"] == 5
    assert c["max.request.size"] == 1048576
    assert c["bootstrap.servers"] == ("localhost:9092",)


def test_consumer_defaults_are_kafkas() -> None:
    c = consumer_config()
    assert c["auto.offset.reset"] == "latest"
    assert c["fetch.min.bytes"] == 1
    assert c["fetch.max.wait.ms"] == 500
    assert c["fetch.max.bytes"] == 52428800
    assert c["max.partition.fetch.bytes"] == 1048576
    assert c["max.poll.records"] == 500


def test_keywords_with_underscores_and_dotted_mapping_agree() -> None:
    a = producer_config({"linger.ms": "20", "acks": "1"}, batch_size=1000)
    assert (a["linger.ms"], a["acks"], a["batch.size"]) == (20, 1, 1000)
    assert producer_config(acks="0")["acks"] == 0
    assert producer_config(bootstrap_servers="a:1,b:2")["bootstrap.servers"] == ("a:1", "b:2")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"lingr_ms": 5}, "lingr.ms"),
        ({"acks": "2"}, "acks"),
        ({"batch_size": "big"}, "batch.size"),
        ({"compression_type": "snappy"}, "compression.type"),
        ({"delivery_timeout_ms": 1000}, "delivery.timeout.ms"),
        ({"bootstrap_servers": "nohost"}, "bootstrap.servers"),
        ({"enable_idempotence": True, "acks": "1"}, "enable.idempotence"),
    ],
)
def test_bad_producer_configs_name_the_key(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        producer_config(**kwargs)


def test_bad_consumer_and_admin_configs() -> None:
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        consumer_config(auto_offset_reset="smallest")
    with pytest.raises(ConfigError, match="unknown admin config 'acks'"):
        admin_config(acks="1")


def test_parse_host_port() -> None:
    assert parse_host_port("localhost:9092") == ("localhost", 9092)
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    for bad in ("localhost", ":9092", "h:0", "h:99999", "h:x"):
        with pytest.raises(ConfigError):
            parse_host_port(bad)


def test_idempotence_is_on_by_default_as_in_kafka_3() -> None:
    assert producer_config()["enable.idempotence"] is True


@pytest.mark.parametrize(
    ("conflict", "needle"),
    [
        ({"acks": "1"}, "acks to all"),
        ({"acks": "0"}, "acks to all"),
        ({"retries": 0}, "retries to non-zero"),
        ({"max_in_flight_requests_per_connection": 6}, "at most 5"),
    ],
)
def test_a_conflicting_config_quietly_disables_default_idempotence(
    conflict: dict[str, object], needle: str
) -> None:
    assert producer_config(**conflict)["enable.idempotence"] is False
    with pytest.raises(ConfigError, match=needle):
        producer_config(enable_idempotence=True, **conflict)
    with pytest.raises(ConfigError, match=needle):
        producer_config({"enable.idempotence": "true"}, **conflict)


def test_idempotence_can_be_switched_off_and_five_in_flight_is_allowed() -> None:
    assert producer_config(enable_idempotence=False)["enable.idempotence"] is False
    c = producer_config(enable_idempotence=True, max_in_flight_requests_per_connection=5)
    assert c["enable.idempotence"] is True
