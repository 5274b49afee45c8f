"""MetadataImage/MetadataDelta replay and TopicsDelta.local_changes, as Kafka's TopicsDelta."""

from __future__ import annotations

import pytest

from protocol.metadata.delta import LocalReplica, MetadataDelta
from protocol.metadata.image import (
    TOPIC_RESOURCE,
    ConfigResource,
    MetadataImage,
    MetadataProvenance,
    MetadataReplayError,
    PartitionRegistration,
    ProducerIdsBlock,
)
from protocol.metadata.records import (
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from protocol.names import TopicPartition

A = "AAAAAAAAAAAAAAAAAAAAAg"
B = "AAAAAAAAAAAAAAAAAAAAAw"


def part(
    topic_id: str, pid: int, replicas: tuple[int, ...], leader: int | None = None
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=replicas,
        isr=replicas,
        leader=replicas[0] if leader is None else leader,
    )


def build(records: list[MetadataRecord], image: MetadataImage | None = None) -> MetadataImage:
    delta = MetadataDelta(image or MetadataImage.empty("cluster-1"))
    for offset, record in enumerate(records, start=(image.highest_offset + 1) if image else 0):
        delta.replay(record, offset=offset, epoch=1)
    return delta.apply()


def create_t(topic_id: str = A, name: str = "t") -> list[MetadataRecord]:
    return [
        TopicRecord(name=name, topic_id=topic_id),
        part(topic_id, 0, (1, 2)),
        part(topic_id, 1, (2, 3)),
        part(topic_id, 2, (3, 1)),
    ]


def test_create_topic_builds_image() -> None:
    image = build(create_t())
    topic = image.topics.get_topic("t")
    assert topic is not None and topic.topic_id == A
    assert image.topics.get_topic_by_id(A) is topic
    assert sorted(topic.partitions) == [0, 1, 2]
    assert image.topics.get_partition(A, 1) == PartitionRegistration(
        replicas=(2, 3), isr=(2, 3), leader=2
    )
    assert image.provenance == MetadataProvenance(3, 1)
    assert image.cluster_id == "cluster-1"


def test_images_are_immutable_and_share_unchanged_parts() -> None:
    first = build(create_t())
    second = build([ConfigRecord(resource_type=2, resource_name="t", name="x", value="1")], first)
    assert first.configs.topic_configs("t") == {}
    assert second.configs.topic_configs("t") == {"x": "1"}
    assert second.topics is first.topics
    with pytest.raises(TypeError):
        first.topics.by_name["u"] = first.topics.by_name["t"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("broker", "deletes", "leaders", "followers"),
    [
        (1, [], [0], [2]),
        (2, [], [1], [0]),
        (3, [], [2], [1]),
        (4, [], [], []),
    ],
)
def test_local_changes_on_create(
    broker: int, deletes: list[int], leaders: list[int], followers: list[int]
) -> None:
    delta = MetadataDelta(MetadataImage.empty())
    delta.replay_all(create_t())
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(broker)
    assert sorted(tp.partition for tp in changes.deletes) == deletes
    assert sorted(tp.partition for tp in changes.leaders) == leaders
    assert sorted(tp.partition for tp in changes.followers) == followers
    for info in [*changes.leaders.values(), *changes.followers.values()]:
        assert info.topic_id == A


def test_local_changes_on_delete() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all([RemoveTopicRecord(topic_id=A)])
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(1)
    assert set(changes.deletes) == {TopicPartition("t", 0), TopicPartition("t", 2)}
    assert changes.deletes[TopicPartition("t", 0)].topic_id == A
    assert not changes.leaders and not changes.followers
    after = delta.apply()
    assert after.topics.get_topic("t") is None and len(after.topics) == 0


def test_recreate_with_new_id_in_one_delta() -> None:
    image = build(create_t(A))
    delta = MetadataDelta(image).replay_all([RemoveTopicRecord(topic_id=A), *create_t(B)])
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(1)
    tp0 = TopicPartition("t", 0)
    assert changes.deletes[tp0].topic_id == A
    assert changes.leaders[tp0].topic_id == B
    after = delta.apply()
    topic = after.topics.get_topic("t")
    assert topic is not None and topic.topic_id == B
    assert after.topics.get_topic_by_id(A) is None


def test_recreate_across_deltas_gets_new_id() -> None:
    image = build([RemoveTopicRecord(topic_id=A)], build(create_t(A)))
    image = build(create_t(B), image)
    topic = image.topics.get_topic("t")
    assert topic is not None and topic.topic_id == B


def test_create_then_delete_in_one_delta_leaves_nothing_to_do() -> None:
    delta = MetadataDelta(MetadataImage.empty()).replay_all(
        [*create_t(), RemoveTopicRecord(topic_id=A)]
    )
    assert delta.topics_delta is not None
    assert not delta.topics_delta.local_changes(1)
    assert len(delta.apply().topics) == 0


def test_leader_moves() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all(
        [PartitionChangeRecord(partition_id=0, topic_id=A, leader=2, isr=(2,))]
    )
    assert delta.topics_delta is not None
    new_leader = delta.topics_delta.local_changes(2)
    old_leader = delta.topics_delta.local_changes(1)
    tp0 = TopicPartition("t", 0)
    assert set(new_leader.leaders) == {tp0} and not new_leader.followers
    assert set(old_leader.followers) == {tp0} and not old_leader.leaders
    after = delta.apply().topics.get_partition(A, 0)
    assert after == PartitionRegistration(
        replicas=(1, 2), isr=(2,), leader=2, leader_epoch=1, partition_epoch=1
    )
    assert not delta.topics_delta.local_changes(3)


def test_isr_only_change_bumps_partition_epoch_not_leader_epoch() -> None:
    image = build([PartitionChangeRecord(partition_id=1, topic_id=A, isr=(2,))], build(create_t()))
    assert image.topics.get_partition(A, 1) == PartitionRegistration(
        replicas=(2, 3), isr=(2,), leader=2, leader_epoch=0, partition_epoch=1
    )


def test_partition_moved_away_is_deleted_locally() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all(
        [PartitionChangeRecord(partition_id=0, topic_id=A, replicas=(2, 3), isr=(2, 3), leader=2)]
    )
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(1)
    assert set(changes.deletes) == {TopicPartition("t", 0)}
    joined = delta.topics_delta.local_changes(3)
    assert set(joined.followers) == {TopicPartition("t", 0)}


def test_leaderless_partition_is_a_follower_change() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all(
        [PartitionChangeRecord(partition_id=0, topic_id=A, leader=NO_LEADER)]
    )
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(1)
    assert set(changes.followers) == {TopicPartition("t", 0)}
    registration = changes.followers[TopicPartition("t", 0)]
    assert registration == LocalReplica(
        A,
        PartitionRegistration(
            replicas=(1, 2), isr=(1, 2), leader=-1, leader_epoch=1, partition_epoch=1
        ),
    )


def test_configs_follow_topic_lifecycle() -> None:
    image = build(
        [
            *create_t(),
            ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="5"),
            ConfigRecord(resource_type=2, resource_name="t", name="segment.ms", value="7"),
            ConfigRecord(resource_type=2, resource_name="t", name="segment.ms", value=None),
        ]
    )
    assert image.configs.topic_configs("t") == {"retention.ms": "5"}
    image = build([RemoveTopicRecord(topic_id=A)], image)
    assert image.configs.topic_configs("t") == {}
    assert ConfigResource(TOPIC_RESOURCE, "t") not in image.configs.resources


def test_configs_of_recreated_topic_in_same_delta() -> None:
    image = build(
        [*create_t(), ConfigRecord(resource_type=2, resource_name="t", name="a", value="1")]
    )
    image = build(
        [
            RemoveTopicRecord(topic_id=A),
            ConfigRecord(resource_type=2, resource_name="t", name="b", value="2"),
            *create_t(B),
        ],
        image,
    )
    assert image.configs.topic_configs("t") == {"b": "2"}


def register(broker_id: int, epoch: int, rack: str | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=A,
        broker_epoch=epoch,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + broker_id),),
        rack=rack,
    )


def test_broker_lifecycle() -> None:
    image = build([register(1, 0, "r1"), register(2, 1)])
    assert [b.broker_id for b in image.cluster.brokers.values()] == [1, 2]
    assert image.cluster.usable_brokers() == []
    image = build([UnfenceBrokerRecord(id=1, epoch=0)], image)
    assert [b.broker_id for b in image.cluster.usable_brokers()] == [1]
    broker = image.cluster.broker(1)
    assert broker is not None and broker.rack == "r1"
    assert broker.endpoint("PLAINTEXT") == BrokerEndpoint(name="PLAINTEXT", host="h", port=9001)
    assert broker.endpoint("NOPE") is None
    image = build([FenceBrokerRecord(id=1, epoch=0)], image)
    assert not image.cluster.is_usable(1)
    image = build([UnregisterBrokerRecord(broker_id=2, broker_epoch=1)], image)
    assert list(image.cluster.brokers) == [1]
    image = build([register(1, 9)], image)  # a restart re-registers with a new epoch
    broker = image.cluster.broker(1)
    assert broker is not None and broker.epoch == 9 and broker.fenced


def test_broker_registration_change_fences_unfences_and_starts_controlled_shutdown() -> None:
    """Kafka's BrokerRegistrationChangeRecord: -1/0/1 for fencing, 0/1 for controlled shutdown,
    both in one record; a change that changes nothing leaves the broker out of the delta."""
    image = build([register(1, 0), register(2, 1)])
    image = build([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1)], image)
    b1 = image.cluster.broker(1)
    assert b1 is not None and not b1.fenced and not b1.in_controlled_shutdown
    assert image.cluster.is_usable(1)

    image = build(
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, in_controlled_shutdown=1)],
        image,
    )
    b1 = image.cluster.broker(1)
    assert b1 is not None and not b1.fenced and b1.in_controlled_shutdown
    assert not image.cluster.is_usable(1)  # shutting down: no new leaderships

    image = build(
        [
            BrokerRegistrationChangeRecord(
                broker_id=2, broker_epoch=1, fenced=1, in_controlled_shutdown=1
            )
        ],
        image,
    )
    b2 = image.cluster.broker(2)
    assert b2 is not None and b2.fenced and b2.in_controlled_shutdown

    # FenceBrokerRecord keeps the controlled-shutdown flag (Kafka's cloneWith).
    image = build([FenceBrokerRecord(id=1, epoch=0)], image)
    b1 = image.cluster.broker(1)
    assert b1 is not None and b1.fenced and b1.in_controlled_shutdown

    # No change: the delta does not list the broker, the image keeps the same registration.
    delta = MetadataDelta(image)
    delta.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0))
    delta.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=1))
    assert delta.cluster_delta is not None and delta.cluster_delta.changed_brokers == {}
    assert delta.apply().cluster.broker(1) is image.cluster.broker(1)

    # A re-registration (restart) leaves controlled shutdown behind.
    image = build([register(1, 7)], image)
    b1 = image.cluster.broker(1)
    assert b1 is not None and b1.fenced and not b1.in_controlled_shutdown


def test_producer_id_blocks_only_go_forward() -> None:
    image = MetadataImage.empty()
    block = image.producer_ids.next_block(3)
    assert block == ProducerIdsBlock(assigned_broker_id=3, first_producer_id=0, size=1000)
    assert (block.last_producer_id, block.next_block_first_id) == (999, 1000)
    image = build(
        [
            ProducerIdsRecord(
                broker_id=3, broker_epoch=0, next_producer_id=block.next_block_first_id
            )
        ],
        image,
    )
    block = image.producer_ids.next_block(1, size=10)
    assert (block.first_producer_id, block.last_producer_id) == (1000, 1009)
    image = build(
        [
            ProducerIdsRecord(
                broker_id=1, broker_epoch=0, next_producer_id=block.next_block_first_id
            )
        ],
        image,
    )
    assert image.producer_ids.next_producer_id == 1010
    with pytest.raises(ValueError, match="at least one id, not 0"):
        image.producer_ids.next_block(1, size=0)
    # A failed replay changes nothing: the delta is dropped, the image stays as it was.
    with pytest.raises(MetadataReplayError, match="not above the current 1010"):
        build([ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1010)], image)
    assert image.producer_ids.next_producer_id == 1010


def test_producer_ids_and_noop() -> None:
    image = build(
        [NoOpRecord(), ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000)]
    )
    assert image.producer_ids.next_producer_id == 1000
    assert image.provenance.last_offset == 1
    assert not image.is_empty
    assert MetadataImage.empty().is_empty


@pytest.mark.parametrize(
    ("records", "needle"),
    [
        ([part(A, 0, (1,))], "unknown topic id"),
        ([PartitionChangeRecord(partition_id=0, topic_id=A, isr=(1,))], "unknown topic id"),
        ([RemoveTopicRecord(topic_id=A)], "unknown topic id"),
        ([*create_t(), RemoveTopicRecord(topic_id=A), RemoveTopicRecord(topic_id=A)], "unknown"),
        ([*create_t(), TopicRecord(name="u", topic_id=A)], "reuses the id"),
        ([*create_t(), PartitionChangeRecord(partition_id=9, topic_id=A, isr=(1,))], "t-9"),
        ([FenceBrokerRecord(id=1, epoch=0)], "not registered"),
        ([register(1, 5), UnfenceBrokerRecord(id=1, epoch=4)], "epoch 4"),
        ([UnregisterBrokerRecord(broker_id=1, broker_epoch=0)], "not registered"),
        (
            [register(1, 5), BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=4, fenced=1)],
            "BrokerRegistrationChangeRecord for broker 1 epoch 4, which is not registered",
        ),
        (
            [register(1, 5), BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=2)],
            "unknown value 2 for fenced",
        ),
        (
            [
                register(1, 5),
                BrokerRegistrationChangeRecord(
                    broker_id=1, broker_epoch=5, in_controlled_shutdown=-1
                ),
            ],
            "unknown value -1 for in_controlled_shutdown",
        ),
        (
            [
                ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=2000),
                ProducerIdsRecord(broker_id=2, broker_epoch=0, next_producer_id=1000),
            ],
            "sets the next producer id to 1000, not above the current 2000",
        ),
        (
            [ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=0)],
            "not above the current 0",
        ),
    ],
)
def test_inconsistent_records_raise_replay_error(
    records: list[MetadataRecord], needle: str
) -> None:
    with pytest.raises(MetadataReplayError) as info:
        build(records)
    assert needle in str(info.value)


def test_removed_topic_id_cannot_be_changed_after_removal() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all([RemoveTopicRecord(topic_id=A)])
    with pytest.raises(MetadataReplayError):
        delta.replay(part(A, 0, (1,)))


def test_unchanged_partitions_are_not_reported() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all(
        [PartitionChangeRecord(partition_id=1, topic_id=A, isr=(2,))]
    )
    assert delta.topics_delta is not None
    changes = delta.topics_delta.local_changes(1)
    assert not changes  # broker 1 is not a replica of partition 1
    assert set(delta.topics_delta.local_changes(3).followers) == {TopicPartition("t", 1)}


def test_replayed_partition_with_same_epoch_is_not_a_change() -> None:
    image = build(create_t())
    delta = MetadataDelta(image).replay_all([part(A, 0, (1, 2))])
    assert delta.topics_delta is not None
    assert not delta.topics_delta.local_changes(1)
