"""Brokers that prove themselves to each other: the inter-broker listener on TLS with client
certificates required (mTLS), or on SASL_SSL with PLAIN, on 3 real broker processes in both
metadata modes. Replication (follower fetches), the controller's requests and forwarded admin
requests all go over it: a topic with replication factor 3 takes acks=all writes with the
whole ISR, and every record is read back. A client without a certificate is refused there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from client import Consumer, KafkaError, Producer, TopicPartition
from client.admin import Admin
from tests.integration.broker.test_broker_tls import write
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster

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
    await cluster.wait_ready()
    bootstrap = cluster.bootstrap
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
