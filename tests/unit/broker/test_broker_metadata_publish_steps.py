"""broker.metadata_publisher: a large committed delta is published in steps, with requests
served between them, cut only between two partition changes (a topic's creation, a snapshot
and anything else stay whole). Before, a fenced broker's 25,000 partition changes were applied
in one go: for ~2 s the broker answered nothing, and every moved partition waited for the
last one. Within a step the local changes are applied in slices (LOCAL_STEP), requests and
heartbeats running between them: a creation of 1,000 local partitions blocked a broker for 4 s
on a busy disk, and the controller fenced it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from broker.metadata_publisher import LOCAL_STEP, MetadataPublisher, publish_steps
from broker.replica.partition_state import PartitionChange
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from protocol.names import TopicPartition

T = "AAAAAAAAAAAAAAAAAAAAAg"


def creation(partitions: int) -> list[MetadataRecord]:
    return [
        TopicRecord(name="t", topic_id=T),
        *(
            PartitionRecord(partition_id=p, topic_id=T, replicas=(1, 2), isr=(1, 2), leader=1)
            for p in range(partitions)
        ),
    ]


def moves(partitions: int) -> list[MetadataRecord]:
    return [PartitionChangeRecord(partition_id=p, topic_id=T, leader=2) for p in range(partitions)]


def kinds(steps: Sequence[Sequence[tuple[int, Any]]]) -> list[list[str]]:
    short = {TopicRecord: "T", PartitionRecord: "P", PartitionChangeRecord: "C"}
    return [[short.get(type(r), "F") for _, r in step] for step in steps]


def test_steps_end_only_between_two_partition_changes() -> None:
    records = list(enumerate([*creation(4), *moves(5), FenceBrokerRecord(id=1, epoch=1)]))
    steps = list(publish_steps(records, 2))
    assert kinds(steps) == [
        ["T", "P", "P", "P", "P", "C"],  # the creation stays whole
        ["C", "C"],
        ["C", "C", "F"],  # the last step takes the rest
    ]
    assert [item for step in steps for item in step] == records


def test_small_deltas_and_snapshots_are_one_step() -> None:
    records: list[Any] = list(enumerate(moves(3)))
    assert list(publish_steps(records, 3)) == [records]
    assert list(publish_steps([], 3)) == [[]]
    snapshot = MetadataImage.empty("c")
    with_snapshot = [*records, snapshot, *records]
    steps = list(publish_steps(with_snapshot, 2))
    assert [len(s) for s in steps] == [2, 3, 2]  # never cut next to the snapshot
    assert steps[1][1] is snapshot


async def publish_beside(
    publisher: MetadataPublisher,
    records: list[tuple[int, Any]],
    request: Callable[[], Awaitable[None]],
) -> None:
    """Run `publisher` over `records` (one read) with `request` beside it until all applied."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(request)
        await nursery.start(publisher.run, OneRead(records))
        with trio.fail_after(30):
            await publisher.wait_for(len(records) - 1)
        nursery.cancel_scope.cancel()


class OneRead:
    """A MetadataSource that delivers `records` at its first read, then nothing more."""

    def __init__(self, records: list[tuple[int, MetadataRecord]]) -> None:
        self.records = records

    def committed_offset(self) -> int:
        return -1

    async def read_committed(self, after_offset: int) -> Sequence[tuple[int, Any]]:
        if after_offset < 0:
            return self.records
        await trio.sleep_forever()
        raise AssertionError


def test_requests_run_between_the_steps_of_a_large_delta() -> None:
    partitions = 5_000
    records = list(enumerate([*creation(partitions), *moves(partitions)]))
    publisher = MetadataPublisher(1, {}, "c")
    seen: list[int] = []

    async def request() -> None:
        """A request's handler: runs whenever the event loop lets it."""
        while publisher.applied_offset < len(records) - 1:
            seen.append(publisher.applied_offset)
            await trio.lowlevel.checkpoint()

    trio.run(publish_beside, publisher, records, request)
    # The request ran at least once while only part of the moves were applied.
    partly = {o for o in seen if partitions < o < len(records) - 1}
    assert len(partly) >= 1, sorted(set(seen))[-5:]


class NoConfigs:
    """The partition manager's one method a creation without topic configs calls."""

    def update_topic_config(self, topic: str) -> int:
        return 0


def test_a_creation_is_applied_locally_in_slices_with_requests_between() -> None:
    partitions = 2 * LOCAL_STEP + 50
    records = list(enumerate(creation(partitions)))
    publisher = MetadataPublisher(1, {}, "c")
    publisher.partitions = NoConfigs()  # type: ignore[assignment]
    slices: list[int] = []
    between: list[tuple[int, int]] = []

    def apply(
        *,
        deletes: list[TopicPartition],
        leaders: list[PartitionChange],
        followers: list[PartitionChange],
    ) -> None:
        slices.append(len(deletes) + len(leaders) + len(followers))

    publisher.apply_changes = apply

    async def request() -> None:
        """A request or a heartbeat: what it sees while the slices are applied."""
        while publisher.applied_offset < len(records) - 1:
            if slices:
                topic = publisher.image.topics.by_name.get("t")
                between.append((len(slices), publisher.applied_offset))
                assert topic is not None  # the image took the whole creation at once
            await trio.lowlevel.checkpoint()

    trio.run(publish_beside, publisher, records, request)
    assert slices == [LOCAL_STEP, LOCAL_STEP, 50]
    # Between the slices, the broker reports (heartbeats) the offset before the creation:
    # its local changes are not all applied yet.
    assert {n for n, _ in between} & {1, 2}
    assert {offset for _, offset in between} == {-1}
