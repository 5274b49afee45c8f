"""Broker config: Kafka names/defaults, topic defaults from log.*, TOML + overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BROKER_CONFIGS, BrokerConfig
from deploy.node.config import load_broker_config
from protocol.config_defs import ConfigError


def test_kafka_defaults() -> None:
    c = BrokerConfig.from_values({})
    assert c["socket.request.max.bytes"] == 104857600
    assert c["queued.max.requests"] == 500
    assert c["connections.max.idle.ms"] == 600000
    assert c["num.partitions"] == 1
    assert c["auto.create.topics.enable"] is True
    assert c.listeners[0].port == 9092
    assert c.log_dirs == ("/tmp/kafka-logs",)
    assert c.topic_defaults()["retention.ms"] == 168 * 3600 * 1000


def test_log_settings_become_topic_defaults_with_kafka_precedence() -> None:
    c = BrokerConfig.from_values({"log.retention.hours": "1", "log.segment.bytes": "2048"})
    assert c.topic_defaults()["retention.ms"] == 3_600_000
    assert c.topic_defaults()["segment.bytes"] == 2048
    c = BrokerConfig.from_values({"log.retention.hours": 1, "log.retention.ms": 5})
    assert c.topic_defaults()["retention.ms"] == 5
    assert c.topic_config_sources()["retention.ms"] is True
    assert c.topic_config_sources()["segment.bytes"] is False
    c = BrokerConfig.from_values({"log.roll.hours": 2, "message.max.bytes": 100})
    assert c.topic_defaults()["segment.ms"] == 7_200_000
    assert c.topic_defaults()["max.message.bytes"] == 100


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"no.such.key": "1"}, "no.such.key"),
        ({"num.partitions": "zero"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"listeners": "nonsense"}, "listeners"),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"),
    ],
)
def test_bad_values_name_the_key(values: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        BrokerConfig.from_values(values)


def test_toml_file_flat_and_nested_plus_overrides(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text(
        '"node.id" = 3\nlisteners = ["PLAINTEXT://127.0.0.1:0"]\n'
        '[log]\n"retention.ms" = 1000\ndirs = ["/a", "/b"]\n'
    )
    c = load_broker_config(path, ["num.partitions=4", "log.retention.ms=2000"])
    assert c.node_id == 3
    assert c.log_dirs == ("/a", "/b")
    assert c["num.partitions"] == 4
    assert c.topic_defaults()["retention.ms"] == 2000
    assert {"node.id", "num.partitions", "log.retention.ms"} <= c.explicit


def test_unknown_key_in_file_or_override_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('"log.retention.mss" = 1\n')
    with pytest.raises(ConfigError, match=r"log\.retention\.mss"):
        load_broker_config(path)
    with pytest.raises(ConfigError, match="bogus"):
        load_broker_config(None, ["bogus=1"])
    with pytest.raises(ConfigError, match="key=value"):
        load_broker_config(None, ["novalue"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_broker_config(tmp_path / "missing.toml")


def test_every_broker_config_has_doc() -> None:
    assert all(d.doc for d in BROKER_CONFIGS.defs.values())


def test_cluster_keys_have_kafkas_defaults() -> None:
    c = BrokerConfig.from_values({})
    # Raft (KRaft) is the default since issue 4: a single-node combined broker+controller.
    assert c.metadata_mode == "raft" and c.combined_mode and not c.zk_mode
    assert c["zookeeper.session.timeout.ms"] == 18000
    assert c.zookeeper_connection_timeout_ms == 18000
    assert c["controlled.shutdown.enable"] is True
    assert c["controlled.shutdown.max.retries"] == 3
    assert c["controlled.shutdown.retry.backoff.ms"] == 5000
    assert c["replica.lag.time.max.ms"] == 30000
    assert c["replica.fetch.max.bytes"] == 1048576
    assert c["replica.fetch.wait.max.ms"] == 500
    assert c["replica.fetch.min.bytes"] == 1
    assert c["replica.fetch.backoff.ms"] == 1000
    assert c["replica.socket.timeout.ms"] == 30000
    assert c["num.replica.fetchers"] == 1
    assert c["max.incremental.fetch.session.cache.slots"] == 1000
    assert c["auto.leader.rebalance.enable"] is True
    assert c["leader.imbalance.check.interval.seconds"] == 300
    assert c["leader.imbalance.per.broker.percentage"] == 10
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_zk_mode_needs_zookeeper_connect_and_a_known_inter_broker_listener() -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        BrokerConfig.from_values({"metadata.mode": "zk"})
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        BrokerConfig.from_values(
            {
                "metadata.mode": "zk",
                "zookeeper.connect": "127.0.0.1:2181",
                "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            }
        )
    c = BrokerConfig.from_values(
        {
            "metadata.mode": "zk",
            "zookeeper.connect": "127.0.0.1:2181/trioka",
            "zookeeper.connection.timeout.ms": 6000,
            "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "internal",
        }
    )
    assert c.zk_mode and c.inter_broker_listener_name == "INTERNAL"
    assert c.zookeeper_connection_timeout_ms == 6000
    with pytest.raises(ConfigError, match=r"metadata\.mode"):
        BrokerConfig.from_values({"metadata.mode": "raftish"})
    with pytest.raises(ConfigError, match=r"replica\.socket\.timeout\.ms"):
        BrokerConfig.from_values({"replica.socket.timeout.ms": 100})
