"""LocalMetadataLog on a tmp dir: append, restart, replay order, listeners, failures."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.records import (
    ConfigRecord,
    MetadataRecord,
    NoOpRecord,
    OffsetRecord,
    TopicRecord,
)
from raft.local_log import LocalMetadataLog, MetadataLogError

TID = "MQ5ms5ZmRRaTnh4Ke6Pe-A"


def topic(i: int) -> TopicRecord:
    return TopicRecord(name=f"t{i}", topic_id=TID)


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[OffsetRecord]] = []

    async def __call__(self, batch: list[OffsetRecord]) -> None:
        self.batches.append(list(batch))

    @property
    def records(self) -> list[OffsetRecord]:
        return [r for b in self.batches for r in b]


async def open_log(path: Path, *listeners: Recorder) -> LocalMetadataLog:
    log = LocalMetadataLog(path)
    for listener in listeners:
        log.add_listener(listener)
    await log.open()
    return log


async def test_append_commits_and_delivers_in_order(tmp_path: Path) -> None:
    first, second = Recorder(), Recorder()
    log = await open_log(tmp_path, first, second)
    assert (log.committed_offset, log.end_offset) == (-1, 0)
    assert await log.append([topic(0), topic(1)]) == 1
    await log.wait_committed(1)
    assert await log.append([NoOpRecord()]) == 2
    expected = [OffsetRecord(0, topic(0)), OffsetRecord(1, topic(1)), OffsetRecord(2, NoOpRecord())]
    assert first.records == second.records == expected
    assert [len(b) for b in first.batches] == [2, 1]
    assert log.committed_offset == 2
    assert await log.read() == expected
    assert await log.read(2) == expected[2:]
    assert (tmp_path / "__cluster_metadata-0").is_dir()
    await log.aclose()


async def test_restart_replays_everything_in_order(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    written: list[MetadataRecord] = []
    for i in range(20):
        batch = [
            topic(i),
            ConfigRecord(resource_type=2, resource_name=f"t{i}", name="x", value=str(i)),
        ]
        await log.append(batch)
        written += batch
    await log.aclose()

    listener = Recorder()
    again = await open_log(tmp_path, listener)
    assert [r.offset for r in listener.records] == list(range(40))
    assert [r.record for r in listener.records] == written
    assert again.committed_offset == 39
    assert await again.append([NoOpRecord()]) == 40
    await again.aclose()


async def test_restart_after_unclean_stop(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    await log.append([topic(1)])
    await log.append([topic(2)])
    # No aclose(): the files are as a crash would leave them after the fsynced appends.
    assert log._log is not None
    log._log.release_handles()
    listener = Recorder()
    again = await open_log(tmp_path, listener)
    assert [r.record for r in listener.records] == [topic(1), topic(2)]
    await again.aclose()


async def test_torn_tail_is_not_replayed(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    await log.append([topic(1)])
    await log.append([topic(2)])
    await log.aclose()
    segment = tmp_path / "__cluster_metadata-0" / f"{0:020d}.log"
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    listener = Recorder()
    again = await open_log(tmp_path, listener)
    assert [r.record for r in listener.records] == [topic(1)]
    assert await again.append([topic(3)]) == 1
    await again.aclose()


async def test_wait_committed_blocks_until_appended(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    done = trio.Event()

    async def waiter() -> None:
        await log.wait_committed(0)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        await log.append([topic(0)])
        with trio.fail_after(5):
            await done.wait()
    await log.aclose()


async def test_listener_sees_records_before_wait_committed_returns(tmp_path: Path) -> None:
    seen: list[int] = []

    async def slow(batch: list[OffsetRecord]) -> None:
        await trio.lowlevel.checkpoint()
        seen.extend(r.offset for r in batch)

    log = LocalMetadataLog(tmp_path)
    log.add_listener(slow)
    await log.open()
    offset = await log.append([topic(0)])
    await log.wait_committed(offset)
    assert seen == [0]
    await log.aclose()


async def test_misuse_is_refused_clearly(tmp_path: Path) -> None:
    log = LocalMetadataLog(tmp_path)
    with pytest.raises(MetadataLogError) as info:
        await log.append([topic(0)])
    assert info.value.code == ErrorCode.NOT_CONTROLLER
    await log.open()
    with pytest.raises(RuntimeError):
        log.add_listener(Recorder())
    with pytest.raises(RuntimeError):
        await log.open()
    with pytest.raises(ValueError):
        await log.append([])
    await log.aclose()
    await log.aclose()
    with pytest.raises(MetadataLogError, match="closed"):
        await log.append([topic(0)])
    with pytest.raises(MetadataLogError, match="closed"):
        await log.wait_committed(5)


async def test_too_large_append_is_refused_and_log_stays_usable(tmp_path: Path) -> None:
    log = await open_log(tmp_path)
    huge = [TopicRecord(name="x" * 1000 + str(i), topic_id=TID) for i in range(9000)]
    with pytest.raises(KafkaError) as info:
        await log.append(huge)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.committed_offset == -1
    assert await log.append([topic(0)]) == 0
    await log.aclose()


async def test_garbage_in_the_log_is_a_clear_error(tmp_path: Path) -> None:
    from protocol.record_batch import Record, build_batch
    from storage.log import Log

    log = await open_log(tmp_path)
    assert log._log is not None
    log._log.append_as_leader(build_batch([Record(value=b"\xc1not a record")]), 0)
    await log.aclose()
    again = LocalMetadataLog(tmp_path)
    with pytest.raises(MetadataLogError, match="offset 0 cannot be read"):
        await again.open()
    assert Log  # storage's Log is what holds the records


async def test_a_broker_publisher_builds_its_image_by_replay(tmp_path: Path) -> None:
    from protocol.metadata.delta import MetadataDelta
    from protocol.metadata.image import MetadataImage
    from protocol.metadata.records import PartitionRecord, RemoveTopicRecord
    from protocol.names import TopicPartition

    class Publisher:
        def __init__(self) -> None:
            self.image = MetadataImage.empty("c")
            self.leaders: list[TopicPartition] = []
            self.deletes: list[TopicPartition] = []

        async def __call__(self, batch: list[OffsetRecord]) -> None:
            delta = MetadataDelta(self.image)
            for offset, record in batch:
                delta.replay(record, offset=offset)
            if delta.topics_delta is not None:
                changes = delta.topics_delta.local_changes(1)
                self.leaders += changes.leaders
                self.deletes += changes.deletes
            self.image = delta.apply()

    records = [
        TopicRecord(name="t", topic_id=TID),
        PartitionRecord(partition_id=0, topic_id=TID, replicas=(1,), isr=(1,), leader=1),
    ]
    publisher = Publisher()
    log = await open_log(tmp_path, publisher)
    await log.append(records)
    assert publisher.leaders == [TopicPartition("t", 0)]
    await log.append([RemoveTopicRecord(topic_id=TID)])
    assert publisher.deletes == [TopicPartition("t", 0)]
    assert publisher.image.highest_offset == 2
    await log.aclose()

    restarted = Publisher()
    again = await open_log(tmp_path, restarted)
    assert restarted.image == publisher.image
    await again.aclose()
