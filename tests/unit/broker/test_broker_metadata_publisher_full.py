"""broker.metadata_publisher: Raft mode's deferred start, FULL apply and snapshot loads."""

from __future__ import annotations

from broker.metadata_publisher import MetadataPublisher, full_local_changes
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import MetadataRecord, PartitionRecord, TopicRecord
from protocol.metadata.snapshot import encode_snapshot, image_from_snapshot
from protocol.names import TopicPartition

A = "AAAAAAAAAAAAAAAAAAAAAg"
B = "AAAAAAAAAAAAAAAAAAAAAw"


def _topic(topic_id: str, name: str = "t") -> list[MetadataRecord]:
    return [
        TopicRecord(name=name, topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1),
        PartitionRecord(partition_id=1, topic_id=topic_id, replicas=(2, 1), isr=(2, 1), leader=2),
        PartitionRecord(partition_id=2, topic_id=topic_id, replicas=(2, 3), isr=(2, 3), leader=2),
    ]


def _image(records: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("c"))
    for offset, record in enumerate(records):
        delta.replay(record, offset=offset, epoch=1)
    return delta.apply()


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list, list, list]] = []

    def __call__(self, *, deletes, leaders, followers) -> None:
        self.calls.append(
            (
                sorted(deletes),
                sorted(c.tp for c in leaders),
                sorted(c.tp for c in followers),
            )
        )


class FakeLog:
    def __init__(self, tp: TopicPartition, topic_id: str | None) -> None:
        self.topic_partition = tp
        self.topic_id = topic_id


class FakeLogManager:
    def __init__(self, logs: list[FakeLog]) -> None:
        self._logs = logs

    def logs(self) -> list[FakeLog]:
        return self._logs


class FakePartitions:
    def __init__(self, logs: list[FakeLog]) -> None:
        self.log_manager = FakeLogManager(logs)
        self.partitions: dict = {}
        self.configs_updated: list[str] = []

    def update_topic_config(self, topic: str) -> int:
        self.configs_updated.append(topic)
        return 0


def _publisher(logs: list[FakeLog]) -> tuple[MetadataPublisher, Recorder]:
    publisher = MetadataPublisher(1, {}, "c")
    publisher.partitions = FakePartitions(logs)  # type: ignore[assignment]
    recorder = Recorder()
    publisher.apply_changes = recorder
    return publisher, recorder


def test_full_local_changes_names_leaders_followers_and_strays() -> None:
    image = _image(_topic(A))
    t = TopicPartition
    local = [(t("t", 0), A), (t("t", 1), None), (t("gone", 0), B), (t("t", 2), A)]
    deletes, leaders, followers = full_local_changes(image, 1, local)
    assert deletes == [t("gone", 0), t("t", 2)]  # not named / not a replica here any more
    assert [c.tp for c in leaders] == [t("t", 0)]
    assert [c.tp for c in followers] == [t("t", 1)]
    # Another topic id under the same name: the old log is a stray.
    deletes, _, _ = full_local_changes(image, 1, [(t("t", 0), B)])
    assert deletes == [t("t", 0)]


def test_deferred_publisher_follows_records_but_applies_nothing_until_apply_full() -> None:
    publisher, recorder = _publisher([FakeLog(TopicPartition("old", 0), B)])
    publisher.defer_local_changes = True
    published = []
    publisher.on_published = lambda: published.append(publisher.applied_offset)
    publisher.publish(list(enumerate(_topic(A))))
    assert publisher.image.topics.get_topic("t") is not None
    assert recorder.calls == [] and published == [3]
    publisher.apply_full()
    assert recorder.calls == [
        ([TopicPartition("old", 0)], [TopicPartition("t", 0)], [TopicPartition("t", 1)])
    ]
    # From now on incremental changes are applied.
    publisher.publish(
        [(4, PartitionRecord(partition_id=3, topic_id=A, replicas=(1,), isr=(1,), leader=1))]
    )
    assert recorder.calls[-1] == ([], [TopicPartition("t", 3)], [])


def test_snapshot_item_replaces_the_image_and_is_applied_as_full() -> None:
    publisher, recorder = _publisher([])
    publisher.publish(list(enumerate(_topic(A))))
    assert len(recorder.calls) == 1
    # The topic was deleted and recreated with another id meanwhile; the broker's log of
    # t-0 (topic A) is a stray now.
    publisher.partitions.log_manager._logs.append(FakeLog(TopicPartition("t", 0), A))  # type: ignore[union-attr]
    snapshot = image_from_snapshot(encode_snapshot(_image(_topic(B))), 120, 3, "c")
    later = TopicRecord(name="y", topic_id="AAAAAAAAAAAAAAAAAAAABA")
    publisher.publish([(5, TopicRecord(name="x", topic_id=B)), snapshot, (121, later)])
    assert publisher.image.topics.get_topic("t").topic_id == B  # type: ignore[union-attr]
    assert publisher.applied_offset == 121
    deletes, leaders, followers = recorder.calls[-1]
    assert deletes == [TopicPartition("t", 0)]
    assert leaders == [TopicPartition("t", 0)] and followers == [TopicPartition("t", 1)]
