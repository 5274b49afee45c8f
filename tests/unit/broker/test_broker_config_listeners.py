"""Named listeners: Kafka's rules for listeners, advertised.listeners,
listener.security.protocol.map and inter.broker.listener.name (KafkaConfig.validateValues)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.config import BrokerConfig
from protocol.config_defs import ConfigError

ZK = {"metadata.mode": "zk", "zookeeper.connect": "127.0.0.1:2181"}
TWO = {
    "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.2:0",
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
}


def test_default_protocol_map_is_kafkas_and_maps_plaintext() -> None:
    c = BrokerConfig.from_values({})
    assert c.listener_security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL",
    }
    assert c.effective_advertised_listeners == c.listeners


def test_internal_and_external_with_a_published_external_address() -> None:
    c = BrokerConfig.from_values(
        {
            **ZK,
            **TWO,
            "advertised.listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://proxy.example:19092",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert [str(a) for a in c.effective_advertised_listeners] == [
        "INTERNAL://127.0.0.1:0",
        "EXTERNAL://proxy.example:19092",
    ]
    assert c.inter_broker_listener_name == "INTERNAL"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"listeners": "INTERNAL://127.0.0.1:0"},
            r"listeners: no security protocol defined for listener INTERNAL",
        ),
        (
            {"listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL"},
            r"listener\.security\.protocol\.map: 'INTERNAL' is not NAME:PROTOCOL",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:TLS"},
            r"unknown security protocol TLS",
        ),
        (
            {
                "process.roles": "broker,controller",
                "node.id": 1,
                "controller.quorum.voters": "1@127.0.0.1:9093",
                "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                "metadata.mode": "raft",
            },
            r"ssl.keystore.location: listener CONTROLLER uses SSL and needs",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SSL",
            },
            r"ssl.keystore.location: listener CLIENTS uses SSL and needs this server's private",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:SASL_SSL"},
            r"ssl.keystore.location: listener PLAINTEXT uses SASL_SSL and needs",
        ),
        (
            {
                "metadata.mode": "zk",
                "zookeeper.connect": "127.0.0.1:2181",
                "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            },
            r"sasl.mechanism.inter.broker.protocol: PLAIN is not one of the mechanisms listener "
            r"PLAINTEXT enables \(SCRAM-SHA-512\)",
        ),
        (
            {"ssl.client.auth": "sometimes"},
            r"ssl.client.auth: 'sometimes' is not one of none, requested, required",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,plaintext:PLAINTEXT"},
            r"PLAINTEXT is mapped twice",
        ),
        (
            {**TWO, "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.2:9092"},
            r"listeners: each listener must have a different port.*share port 9092",
        ),
        (
            {**TWO, "advertised.listeners": "OTHER://h:1"},
            r"advertised\.listeners: OTHER is not one of the listeners",
        ),
        (
            {**TWO, "advertised.listeners": "EXTERNAL://0.0.0.0:9092"},
            r"nonroutable meta-address 0\.0\.0\.0",
        ),
        (
            {**TWO, "advertised.listeners": "EXTERNAL://a:1,EXTERNAL://b:2"},
            r"advertised\.listeners: listener names must be unique",
        ),
        (
            # ZK mode: the inter-broker listener must be advertised (other brokers dial it).
            {**ZK, **TWO, "inter.broker.listener.name": "INTERNAL",
             "advertised.listeners": "EXTERNAL://proxy:1"},
            r"inter\.broker\.listener\.name: INTERNAL must be one of the advertised listeners "
            r"\['EXTERNAL'\]",
        ),
        (
            {**ZK, **TWO},  # default PLAINTEXT is not a listener here
            r"inter\.broker\.listener\.name: PLAINTEXT must be one of the advertised",
        ),
    ],
)  # fmt: skip
def test_bad_listener_configs_name_the_problem(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_values(values)


def test_ipv4_and_ipv6_listeners_may_share_a_port() -> None:
    BrokerConfig.from_values(
        {
            "listeners": "A://127.0.0.1:9092,B://[::1]:9092",
            "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
        }
    )
