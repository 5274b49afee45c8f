"""broker.handlers.metadata: Metadata answers are kept per topic between requests and encoded
once (`TopicEntries`, `reused_message`), and a kept answer never outlives what it was built
from: its topic's image, the live brokers, the brokers reachable on the request's listener."""

from __future__ import annotations

import trio

from broker.config import Listener
from broker.handlers.metadata import LiveBrokers, MetadataHandler
from broker.server import BoundListener, ConnectionInfo
from protocol.codec import encode_response
from protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataTopic
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from protocol.schema import to_wire

A, B = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"


class Cluster:
    """An image moved on by records, and broker 1's Metadata handler over it."""

    def __init__(self) -> None:
        self.image = MetadataImage.empty("c")
        self.offset = 0
        brokers = LiveBrokers(
            node_id=1,
            rack=None,
            advertised=(Listener("PLAINTEXT", "127.0.0.1", 19091),),
            self_listed_once_unfenced=True,
            image=lambda: self.image,
            bound=lambda: (BoundListener("PLAINTEXT", "127.0.0.1", 19091),),
        )
        self.handler = MetadataHandler(
            brokers=brokers,
            image=lambda: self.image,
            create_topics=None,  # type: ignore[arg-type]  (no auto-creation asked)
            auto_create_topics=False,
            cluster_id="c",
            controller_id=lambda: 3001,
        )

    def replay(self, *records: MetadataRecord) -> None:
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record, self.offset)
            self.offset += 1
        self.image = delta.apply()

    def metadata(self, listener: str = "PLAINTEXT") -> MetadataResponse:
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        return trio.run(self.handler.metadata, request, ConnectionInfo("peer", listener))

    def topic(self, name: str) -> MetadataTopic:
        return next(t for t in self.metadata().topics if t.name == name)


def _register(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"inc-{broker_id}",
        broker_epoch=broker_id,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=19090 + broker_id),),
    )


def _cluster() -> Cluster:
    cluster = Cluster()
    cluster.replay(
        *(_register(b) for b in (1, 2, 3)),
        *(UnfenceBrokerRecord(id=b, epoch=b) for b in (1, 2, 3)),
        TopicRecord(name="a", topic_id=A),
        TopicRecord(name="b", topic_id=B),
        *(
            PartitionRecord(
                partition_id=p, topic_id=t, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p
            )
            for t in (A, B)
            for p in (0, 1)
        ),
    )
    return cluster


def test_an_unchanged_topic_is_answered_from_the_kept_entry() -> None:
    cluster = _cluster()
    first = cluster.metadata()
    second = cluster.metadata()
    assert [t.name for t in second.topics] == ["a", "b"]
    assert all(x is y for x, y in zip(first.topics, second.topics, strict=True))
    # Its encoding is kept on it too: the same lists, not walked again.
    assert to_wire(second)[3][0] is to_wire(first)[3][0]
    assert encode_response(7, first) == encode_response(7, second)


def test_a_changed_topic_is_rebuilt_and_the_others_are_kept() -> None:
    cluster = _cluster()
    before = {t.name: t for t in cluster.metadata().topics}
    cluster.replay(PartitionChangeRecord(partition_id=0, topic_id=A, leader=2, isr=(2, 3)))
    after = {t.name: t for t in cluster.metadata().topics}
    assert after["b"] is before["b"]
    assert after["a"].partitions[0].leader_id == 2
    assert after["a"].partitions[0].isr_nodes == (2, 3)
    assert to_wire(after["a"]) != to_wire(before["a"])


def test_fencing_a_broker_renews_every_entry() -> None:
    """Leader errors and offline replicas depend on the live brokers, not only on the topic."""
    cluster = _cluster()
    cluster.metadata()
    cluster.replay(FenceBrokerRecord(id=2, epoch=2))
    a = cluster.topic("a")
    assert a.partitions[1].error_code != 0  # led by fenced broker 2: LEADER_NOT_AVAILABLE
    assert a.partitions[0].offline_replicas == (2,)
    assert cluster.topic("b").partitions[0].offline_replicas == (2,)


def test_a_deleted_topic_is_not_answered_from_the_cache() -> None:
    cluster = _cluster()
    cluster.metadata()
    cluster.replay(RemoveTopicRecord(topic_id=A))
    assert [t.name for t in cluster.metadata().topics] == ["b"]
    answer = trio.run(
        cluster.handler.metadata,
        MetadataRequest(topics=("a",), allow_auto_topic_creation=False),
        ConnectionInfo("peer", "PLAINTEXT"),
    )
    assert answer.topics[0].error_code != 0 and not answer.topics[0].partitions
