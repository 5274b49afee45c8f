"""raft.metadata_log.RaftMetadataLog on a real RaftDriver (one voter, MemoryLogStore, no
network): appends commit and reach the listeners as (offset, record) pairs before append
returns; the control entries' offsets arrive as NoOpRecords so a strict ControllerState replay
has no gaps; a restart on the same store delivers the snapshot as an image, then the tail; a
node that does not lead answers NOT_CONTROLLER naming the leader. Waits have deadlines."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import NoOpRecord, OffsetRecord, TopicRecord
from protocol.metadata.snapshot import encode_snapshot
from raft.core import QuorumStateData, RaftConfig, Role
from raft.driver import RaftDriver
from raft.log_store import MemoryLogStore
from raft.metadata_log import CommittedRecords, RaftMetadataLog, not_controller_message


class NoNetwork:
    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"node {to_node} is not reachable")


class MemoryQuorumState:
    def __init__(self) -> None:
        self.state: QuorumStateData | None = None

    def read(self) -> QuorumStateData | None:
        return self.state

    def write(self, state: QuorumStateData) -> None:
        self.state = state


class Listener:
    def __init__(self) -> None:
        self.state = ControllerState()
        self.records: list[OffsetRecord] = []
        self.images: list[MetadataImage] = []

    async def on_records(self, committed: CommittedRecords) -> None:
        self.records.extend(committed.records)
        self.state.replay(committed.records, committed.epoch)  # strict: raises on a gap

    async def on_image(self, image: MetadataImage) -> None:
        self.images.append(image)
        self.state = ControllerState(image)


def config(voters: frozenset[int] = frozenset({1}), linger_ms: int = 1) -> RaftConfig:
    return RaftConfig(
        node_id=1,
        voters=voters,
        election_timeout_ms=50,
        fetch_timeout_ms=100,
        election_backoff_max_ms=50,
        request_timeout_ms=100,
        append_linger_ms=linger_ms,
    )


@asynccontextmanager
async def running(
    store: MemoryLogStore,
    quorum: MemoryQuorumState,
    voters: frozenset[int] = frozenset({1}),
    linger_ms: int = 1,
) -> AsyncIterator[tuple[RaftDriver, RaftMetadataLog, Listener]]:
    driver = RaftDriver(config(voters, linger_ms), store, quorum, NoNetwork(), rng=random.Random(7))
    metadata_log = RaftMetadataLog(driver)
    listener = Listener()
    metadata_log.add_listener(listener.on_records, listener.on_image)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        yield driver, metadata_log, listener
        nursery.cancel_scope.cancel()


async def wait_leader(driver: RaftDriver) -> None:
    with trio.fail_after(10):
        while driver.role is not Role.LEADER:
            await driver.role_changed.wait()


async def test_append_commits_and_listeners_replay_without_gaps() -> None:
    async with running(MemoryLogStore(), MemoryQuorumState()) as (driver, metadata_log, listener):
        await wait_leader(driver)
        with trio.fail_after(10):
            last = await metadata_log.append([TopicRecord(name="a", topic_id="id-a")])
            await metadata_log.wait_committed(last)
        # Offset 0 is the leader's control entry: delivered as a NoOpRecord.
        assert listener.records[0] == OffsetRecord(0, NoOpRecord())
        assert listener.records[-1] == OffsetRecord(last, TopicRecord(name="a", topic_id="id-a"))
        assert [r.offset for r in listener.records] == list(range(last + 1))
        assert listener.state.topic("a") is not None
        assert listener.state.last_applied_offset == last
        assert metadata_log.applied_end_offset == last + 1


async def test_restart_loads_the_snapshot_then_the_tail() -> None:
    store, quorum = MemoryLogStore(), MemoryQuorumState()
    async with running(store, quorum) as (driver, metadata_log, listener):
        await wait_leader(driver)
        with trio.fail_after(10):
            first = await metadata_log.append([TopicRecord(name="a", topic_id="id-a")])
            await metadata_log.wait_committed(first)  # append returns once accepted
            end = first + 1
            await driver.create_snapshot(end, encode_snapshot(listener.state.image))
            await driver.delete_before_snapshot()
            tail = await metadata_log.append([TopicRecord(name="b", topic_id="id-b")])
            await metadata_log.wait_committed(tail)
    assert store.start_offset == end

    async with running(store, quorum) as (driver, metadata_log, listener):
        with trio.fail_after(10):
            await metadata_log.wait_committed(tail)
        assert [i.provenance.last_offset for i in listener.images] == [end - 1]
        assert listener.images[0].topics.by_name.keys() == {"a"}
        assert listener.records[0].offset == end  # the tail continues after the snapshot
        assert set(listener.state.image.topics.by_name) == {"a", "b"}


async def test_append_on_a_node_that_does_not_lead_is_not_controller() -> None:
    # Voters 1 and 2 with no network: node 1 never wins an election.
    store, quorum = MemoryLogStore(), MemoryQuorumState()
    async with running(store, quorum, frozenset({1, 2})) as (_, metadata_log, _listener):
        with trio.fail_after(10), pytest.raises(KafkaError) as raised:
            await metadata_log.append([NoOpRecord()])
    assert raised.value.code is ErrorCode.NOT_CONTROLLER
    assert "no active controller" in raised.value.message


async def test_append_returns_before_the_commit_and_a_lost_leadership_fails_the_wait() -> None:
    # A 10 s linger: nothing the test appends commits before the resignation.
    async with running(MemoryLogStore(), MemoryQuorumState(), linger_ms=10_000) as (
        driver,
        metadata_log,
        listener,
    ):
        await wait_leader(driver)
        with trio.fail_after(5):
            first = await metadata_log.append([TopicRecord(name="a", topic_id="id-a")])
            second = await metadata_log.append([TopicRecord(name="b", topic_id="id-b")])
            # Both accepted at known offsets, neither committed nor delivered.
            assert second == first + 1
            assert metadata_log.applied_end_offset <= first
            await driver.resign()
            for offset in (first, second):
                with pytest.raises(KafkaError) as raised:
                    await metadata_log.wait_committed(offset)
                assert raised.value.code is ErrorCode.NOT_CONTROLLER
        assert all(r.offset < first for r in listener.records)


def test_not_controller_message_names_the_leader() -> None:
    assert "the active controller is 3002" in not_controller_message(3001, 3002)
    assert "no active controller" in not_controller_message(3001, -1)
    assert "taking over" in not_controller_message(3001, 3001, leading=True)
    # Its own stale hint (resigned, pre-voting) is no active controller.
    assert "no active controller" in not_controller_message(3001, 3001)
