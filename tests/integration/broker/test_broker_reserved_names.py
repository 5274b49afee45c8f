"""Names a client must not take, on a real default (standalone) broker. An independent probe of
200d5c1 created `__cluster_metadata`, produced one record and restarted the broker: the
topic's directory was the metadata log's own, recovery truncated it, and every topic was
deleted as a stray."""

from __future__ import annotations

import pytest

from client import Admin, KafkaError, Producer
from protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess


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
