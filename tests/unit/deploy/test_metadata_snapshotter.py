"""deploy.node.broker_raft.MetadataSnapshotter: a snapshot is labelled with the offset of the
image it encodes. While a large step's local changes are applied in slices the image is ahead
of the publisher's applied offset; labelling the snapshot with the latter would have replayed
records onto an image that has them (partition and leader epochs bumped twice)."""

from __future__ import annotations

from typing import Any

from broker.metadata_publisher import LOCAL_STEP, MetadataPublisher
from deploy.node.broker_raft import MetadataSnapshotter
from protocol.metadata.records import PartitionRecord, TopicRecord
from raft.log_store import SnapshotId

T = "AAAAAAAAAAAAAAAAAAAAAg"


class NoConfigs:
    def update_topic_config(self, topic: str) -> int:
        return 0


class Store:
    start_offset = 0


class Driver:
    """The RaftDriver calls the snapshotter makes."""

    def __init__(self) -> None:
        self.store = Store()
        self.applied_offset = 10_000
        self.snapshots: list[int] = []

    async def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        self.snapshots.append(end_offset)
        return SnapshotId(end_offset, 1)

    async def delete_before_snapshot(self) -> int:
        return self.snapshots[-1]


class Source:
    bytes_since_snapshot = 0


async def test_a_snapshot_taken_between_two_slices_is_labelled_with_its_image() -> None:
    publisher = MetadataPublisher(1, {}, "c")
    publisher.partitions = NoConfigs()  # type: ignore[assignment]
    publisher.apply_changes = lambda **changes: None
    records: list[Any] = [TopicRecord(name="t", topic_id=T)] + [
        PartitionRecord(partition_id=p, topic_id=T, replicas=(1,), isr=(1,), leader=1)
        for p in range(LOCAL_STEP + 5)
    ]
    steps = publisher._publishing(list(enumerate(records)), None)
    next(steps)  # the first slice is applied; the image already holds the whole step
    assert publisher.applied_offset == -1
    assert publisher.image.provenance.last_offset == len(records) - 1
    driver = Driver()
    snapshotter = MetadataSnapshotter(driver, Source(), publisher, max_bytes=1)  # type: ignore[arg-type]
    await snapshotter.snapshot_once()
    assert driver.snapshots == [len(records)]
