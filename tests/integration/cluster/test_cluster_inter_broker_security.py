"""Brokers that prove themselves to each other: the inter-broker listener on TLS with client
certificates required (mTLS), or on SASL_SSL with PLAIN, on 3 real broker processes in both
metadata modes, and with SCRAM-SHA-512 in Raft mode. Replication (follower fetches), the controller's requests and forwarded admin
requests all go over it: a topic with replication factor 3 takes acks=all writes with the
whole ISR, and every record is read back. A client without a certificate is refused there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from broker.sasl import sasl_settings
from client import Consumer, KafkaError, Producer, TopicPartition
from client.admin import Admin
from client.admin_users import upsertion
from deploy.node.controller_config import ControllerProcessConfig
from deploy.node.security import controller_security
from protocol.config_defs import ConfigError
from protocol.scram import ScramMechanism
from tests.integration.broker.test_broker_tls import write
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)


def secured(tmp_path: Path, protocol: str) -> dict[str, Any]:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    settings = {
        "listeners": "CLIENTS://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": f"CLIENTS:PLAINTEXT,INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": write(tmp_path, "node.pem", leaf.private_key_and_cert_chain_pem),
        "ssl.truststore.location": write(tmp_path, "ca.pem", ca.cert_pem),
    }
    if protocol == "SSL":
        settings["ssl.client.auth"] = "required"
    else:
        settings["sasl.enabled.mechanisms"] = "PLAIN"
        settings["listener.name.internal.plain.sasl.jaas.config"] = JAAS
    return settings


async def replicated_round_trip(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap

    async def all_brokers_live() -> bool:
        # Asked of a broker (the harness's own wait asks the controllers, in plaintext).
        async with Admin(bootstrap_servers=bootstrap) as admin:
            return len((await admin.describe_cluster()).brokers) == 3

    await wait_until(all_brokers_live, within=60, every=0.2)
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topic("replicated", 1, 3, {"min.insync.replicas": "3"})
    async with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        for i in range(20):
            await producer.send_and_wait("replicated", b"r%d" % i, partition=0)
    got: list[bytes | None] = []
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("replicated", 0)])
        with trio.fail_after(30):
            while len(got) < 20:
                got += [r.value for r in await consumer.poll(200)]
    assert got == [b"r%d" % i for i in range(20)]


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
async def test_replication_over_an_authenticated_inter_broker_listener(
    cluster_factory: ClusterFactory, tmp_path: Path, protocol: str
) -> None:
    settings = secured(tmp_path, protocol)
    cluster = cluster_factory(3, broker_overrides={n: settings for n in (1, 2, 3)})
    await replicated_round_trip(cluster)
    internal = [
        e for e in cluster.brokers[1].events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "INTERNAL"
    ]  # fmt: skip
    address = f"127.0.0.1:{internal[0]['port']}"
    # A client with the CA but no certificate (or no login) gets nowhere on that listener.
    refused = {"security_protocol": "SSL", "ssl_ca_location": settings["ssl.truststore.location"]}
    if protocol == "SASL_SSL":
        refused |= {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                    "sasl_username": "broker", "sasl_password": "wrong"}  # fmt: skip
    with pytest.raises(KafkaError):
        async with Admin(bootstrap_servers=address, default_api_timeout_ms=4000,
                         **refused) as admin:  # fmt: skip
            await admin.list_topics()


CONTROLLER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="node" password="node-secret" user_node="node-secret";'
)


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
async def test_a_raft_cluster_over_an_authenticated_controller_listener(
    raft_cluster_factory, tmp_path: Path, protocol: str
) -> None:
    """The voters among themselves and the brokers to them (registration, heartbeats,
    forwarded requests, the metadata they fetch) over mTLS or SASL_SSL/PLAIN."""
    tls = secured(tmp_path, "SSL")
    settings = {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:{protocol}",
        "ssl.keystore.location": tls["ssl.keystore.location"],
        "ssl.truststore.location": tls["ssl.truststore.location"],
    }
    if protocol == "SSL":
        controllers = {**settings, "ssl.client.auth": "required"}
    else:
        settings |= {"sasl.enabled.mechanisms": "PLAIN",
                     "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS}  # fmt: skip
        controllers = settings
    cluster = raft_cluster_factory(
        3, controller_overrides=controllers, broker_overrides={n: settings for n in (1, 2, 3)}
    )
    await replicated_round_trip(cluster)


def test_scram_on_a_controller_listener_is_refused(tmp_path: Path) -> None:
    config = ControllerProcessConfig.from_values({
        "process.roles": "controller", "node.id": 1, "metadata.log.dir": str(tmp_path),
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })  # fmt: skip
    with pytest.raises(ConfigError, match="PLAIN only"):
        sasl_settings(config, config.listeners, None)
    with pytest.raises(ConfigError, match="username"):
        controller_security(config, "CONTROLLER")


SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)


async def test_replication_over_scram_between_raft_brokers(
    raft_cluster_factory, tmp_path: Path
) -> None:
    """SCRAM-SHA-512 on the inter-broker listener (SASL_SSL): the brokers' own credential lives
    in the metadata, so it is created once they are up (Kafka can bootstrap it at format time,
    KIP-900); from then on replication logs in with it."""
    tls = secured(tmp_path, "SSL")
    settings = {
        "listeners": "CLIENTS://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,INTERNAL:SASL_SSL,"
        "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": tls["ssl.keystore.location"],
        "ssl.truststore.location": tls["ssl.truststore.location"],
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }
    cluster = raft_cluster_factory(3, broker_overrides={n: settings for n in (1, 2, 3)})
    async with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        await admin.alter_user_scram_credentials(
            [upsertion("broker", "broker-secret", ScramMechanism.SCRAM_SHA_512)]
        )
    await replicated_round_trip(cluster)
