"""Names a client must not take, on a real default (standalone) broker. An independent probe of
200d5c1 created `__cluster_metadata`, produced one record and restarted the broker: the
topic's directory was the metadata log's own, recovery truncated it, and every topic was
deleted as a stray."""

from __future__ import annotations

import pytest

from client import Admin, KafkaError, Producer
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.stop_replica import StopReplicaRequest
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient


async def test_the_metadata_log_name_is_refused_and_nothing_is_lost(broker: BrokerProcess) -> None:
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("kept", 1, 1)
        with pytest.raises(KafkaError) as info:
            await admin.create_topic("__cluster_metadata", 1, 1)
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert "Creation of internal topic __cluster_metadata is prohibited." in str(info.value)
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
        await producer.send_and_wait("kept", b"v", partition=0)
    await broker.arestart()
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert "kept" in await admin.list_topics()
        assert "__cluster_metadata" not in await admin.list_topics(include_internal=True)


async def test_the_longest_legal_topic_name_can_be_deleted(broker: BrokerProcess) -> None:
    """249 characters, Kafka's limit: before, its -delete directory name was too long
    (ENAMETOOLONG) and the topic stayed on disk although the CLI said it was deleted."""
    name = "x" * 249
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(name, 2, 1)
        await admin.delete_topics([name])
        assert name not in await admin.list_topics()
    await broker.arestart()
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert name not in await admin.list_topics()
    assert not [p for p in broker.log_dir.iterdir() if p.name.startswith("xxxx")]


async def test_a_client_listener_refuses_what_only_brokers_send(broker_factory) -> None:
    """A broker with its own listener for clients (inter.broker.listener.name another one)
    answers CLUSTER_AUTHORIZATION_FAILED there to inter-broker requests, and clients are
    served as before."""
    broker: BrokerProcess = broker_factory(
        {
            "listeners": "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    (client_listener,) = [
        e for e in broker.events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "CLIENT"
    ]  # fmt: skip
    address = f"127.0.0.1:{client_listener['port']}"
    async with await WireClient.connect("127.0.0.1", client_listener["port"]) as c:
        for forged in (
            ControlledShutdownRequest(broker_id=1, broker_epoch=-1),
            StopReplicaRequest(
                controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=()
            ),
            FetchRequest(replica_id=7, max_wait_ms=0, min_bytes=0, topics=()),
        ):
            answer = await c.request(forged)
            assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, forged
        versions = await c.request(ApiVersionsRequest())
        assert versions.broker_epoch == -1
    async with Admin(bootstrap_servers=address) as admin:
        await admin.create_topic("via-client", 1, 1)
    async with Producer(bootstrap_servers=address, acks="all") as producer:
        await producer.send_and_wait("via-client", b"v", partition=0)
