"""raft.driver.RaftDriver in process: three drivers over an in-memory transport that passes
every request and answer through the wire codec (encode, frame, decode), on real
DiskLogStores and quorum-state files in tmp_path. Real time (timeouts scaled down), waits
with deadlines only."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from client.errors import KafkaConnectionError
from protocol.codec import (
    decode_request,
    decode_response_body,
    decode_response_header,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages import describe_quorum as dq
from protocol.messages import vote as wv
from raft import wire
from raft.core import RaftConfig, Role
from raft.disk_log_store import DiskLogStore
from raft.driver import NotLeaderError, RaftDriver
from raft.log_store import Entry, SnapshotId
from raft.quorum_state import FileQuorumStateStore
from tests.support.waiting import wait_until

VOTERS = frozenset({1, 2, 3})
CLUSTER = "driver-test-cluster"


def quick_config(node_id: int) -> RaftConfig:
    return RaftConfig(
        node_id=node_id,
        voters=VOTERS,
        election_timeout_ms=150,
        fetch_timeout_ms=300,
        election_backoff_max_ms=100,
        request_timeout_ms=300,
        append_linger_ms=2,
        fetch_max_wait_ms=100,
    )


class MemoryTransport:
    """Routes node id -> driver; each request and answer goes through the codec as bytes."""

    def __init__(self) -> None:
        self.nodes: dict[int, RaftDriver] = {}
        self.down: set[int] = set()

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        driver = self.nodes.get(to_node)
        if driver is None or to_node in self.down:
            raise KafkaConnectionError(f"node {to_node} is not reachable")
        frame = encode_request(1, "raft-test", request)
        decoded = decode_request(frame[4:]).body
        with trio.fail_after(timeout_s):
            answer = await driver.handle_request(decoded)
        corr, raw = decode_response_header(encode_response(1, answer)[4:])
        assert corr == 1
        return decode_response_body(type(request).RESPONSE, raw)  # type: ignore[attr-defined, no-any-return]


@dataclass
class Node:
    node_id: int
    directory: Path
    driver: RaftDriver | None = None
    scope: trio.CancelScope | None = None
    applied: list[Entry] = field(default_factory=list)
    calls: list[list[bytes]] = field(default_factory=list)
    """The entries each call of the commit listener got."""
    store: DiskLogStore | None = None
    stopped: trio.Event = field(default_factory=trio.Event)
    snapshots: list[tuple[SnapshotId, bytes]] = field(default_factory=list)


class Cluster:
    def __init__(self, tmp_path: Path, nursery: trio.Nursery) -> None:
        self.transport = MemoryTransport()
        self.nursery = nursery
        self.nodes = {i: Node(i, tmp_path / f"node{i}") for i in sorted(VOTERS)}
        self.tmp_path = tmp_path

    async def start(self, node_id: int) -> None:
        """Start a voter, or an observer (an id not in VOTERS: it fetches, never votes)."""
        if node_id not in self.nodes:
            self.nodes[node_id] = Node(node_id, self.tmp_path / f"node{node_id}")
        node = self.nodes[node_id]
        node.applied = []
        node.snapshots = []
        node.store = DiskLogStore(node.directory)
        quorum = FileQuorumStateStore(node.store.directory, voters=VOTERS, cluster_id=CLUSTER)
        driver = RaftDriver(
            quick_config(node_id),
            node.store,
            quorum,
            self.transport,
            cluster_id=CLUSTER,
            rng=random.Random(node_id),
        )

        async def on_committed(entries: Sequence[Entry]) -> None:
            node.applied.extend(entries)
            node.calls.append([e.data for e in entries])

        async def on_snapshot(snapshot_id: SnapshotId, data: bytes) -> None:
            node.snapshots.append((snapshot_id, data))

        driver.add_listener(on_committed, on_snapshot)
        node.driver = driver
        self.transport.nodes[node_id] = driver
        self.transport.down.discard(node_id)

        node.stopped = trio.Event()

        async def run(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            try:
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    await driver.run()
            finally:
                node.stopped.set()

        node.scope = await self.nursery.start(run)
        await driver.started.wait()

    async def stop(self, node_id: int) -> None:
        """A crash as the driver sees it: cancelled mid-loop, unreachable; the store is closed
        once the loop is gone (a flush in its worker thread finishes first)."""
        node = self.nodes[node_id]
        assert node.scope is not None and node.store is not None
        self.transport.down.add(node_id)
        node.scope.cancel()
        await node.stopped.wait()
        node.store.close()
        node.driver = None

    def driver(self, node_id: int) -> RaftDriver:
        driver = self.nodes[node_id].driver
        assert driver is not None
        return driver

    def leader(self) -> int | None:
        leaders = [
            i
            for i, n in self.nodes.items()
            if n.driver is not None and n.driver.started.is_set() and n.driver.role is Role.LEADER
        ]
        return leaders[0] if len(leaders) == 1 else None

    async def wait_leader(self, *, within: float = 10.0, not_epoch: int = -1) -> int:
        await wait_until(
            lambda: self.leader() is not None and self.driver(self.leader()).epoch > not_epoch,  # type: ignore[arg-type]
            within=within,
        )
        leader = self.leader()
        assert leader is not None
        return leader


async def test_three_drivers_elect_one_leader_and_commit(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        epoch = cluster.driver(leader).epoch
        followers = [i for i in VOTERS if i != leader]
        await wait_until(
            lambda: all(
                cluster.driver(i).role is Role.FOLLOWER and cluster.driver(i).leader_id == leader
                for i in followers
            ),
            within=5,
        )
        offsets = [await cluster.driver(leader).propose([f"r{n}".encode()]) for n in range(5)]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        # Every node applies the same committed records, in order, control entries skipped.
        await wait_until(
            lambda: all(
                [e.data for e in cluster.nodes[i].applied] == [b"r0", b"r1", b"r2", b"r3", b"r4"]
                for i in VOTERS
            ),
            within=5,
        )
        assert [e.offset for e in cluster.nodes[leader].applied] == offsets
        # A follower refuses proposals, naming the leader.
        with pytest.raises(NotLeaderError) as info:
            await cluster.driver(followers[0]).propose([b"nope"])
        assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert info.value.leader_id == leader
        # DescribeQuorum: the leader answers with every voter's log end; a follower refuses.
        desc = cluster.driver(leader).describe_quorum(wire.describe_quorum_request())
        part = desc.topics[0].partitions[0]
        assert (part.error_code, part.leader_id, part.leader_epoch) == (0, leader, epoch)
        assert part.high_watermark == offsets[-1] + 1
        assert [v.replica_id for v in part.current_voters] == [1, 2, 3]
        await wait_until(
            lambda: all(
                v.log_end_offset == offsets[-1] + 1
                for v in cluster.driver(leader)
                .describe_quorum()
                .topics[0]
                .partitions[0]
                .current_voters
            ),
            within=5,
        )
        other = cluster.driver(followers[0]).describe_quorum().topics[0].partitions[0]
        assert other.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert other.leader_id == leader
        nursery.cancel_scope.cancel()


async def test_a_proposed_batch_reaches_the_listeners_whole(tmp_path: Path) -> None:
    """A topic's creation is one batch (TopicRecord and its PartitionRecords): the listeners
    get it in one call, or a broker's publisher, running between two calls, would show a topic
    with part of its partitions (a review found 249 of 600, with the driver handing committed
    entries over 250 at a time)."""
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        records = [b"r%d" % n for n in range(601)]
        await cluster.driver(leader).propose(records)
        await wait_until(
            lambda: all([e.data for e in cluster.nodes[i].applied] == records for i in VOTERS),
            within=10,
        )
        for i in VOTERS:
            (whole,) = [c for c in cluster.nodes[i].calls if records[0] in c]
            assert records[-1] in whole
        nursery.cancel_scope.cancel()


async def test_wrong_cluster_id_and_partition_are_refused(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        await cluster.start(1)
        request = wire.request_to_wire(
            wire.cm.VoteRequest(sender=2, epoch=5, last_epoch=0, end_offset=0),
            to_node=1,
            cluster_id="another-cluster",
        )
        answer = await cluster.driver(1).handle_request(request)
        assert answer.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
        assert "another-cluster" in (answer.error_message or "")
        bad = dq.DescribeQuorumRequest(
            topics=(
                dq.DescribeQuorumTopic(
                    topic_name="other", partitions=(dq.DescribeQuorumPartition(partition_index=0),)
                ),
            )
        )
        refused = await cluster.driver(1).handle_request(bad)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert "other-0" in (refused.error_message or "")
        nursery.cancel_scope.cancel()


async def test_follower_restart_recovers_from_disk(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        for n in range(3):
            await cluster.driver(leader).propose([f"a{n}".encode()])
        follower = min(i for i in VOTERS if i != leader)
        await wait_until(
            lambda: [e.data for e in cluster.nodes[follower].applied] == [b"a0", b"a1", b"a2"],
            within=5,
        )
        epoch = cluster.driver(follower).epoch
        await cluster.stop(follower)
        # The rest keep committing while it is down.
        for n in range(3, 6):
            await cluster.driver(leader).propose([f"a{n}".encode()])
        await cluster.start(follower)
        driver = cluster.driver(follower)
        # The quorum-state file brought back its epoch and leader before any message.
        assert driver.epoch == epoch
        assert driver.leader_id == leader
        want = [f"a{n}".encode() for n in range(6)]
        # It replays its own log from disk and fetches the rest.
        await wait_until(
            lambda: [e.data for e in cluster.nodes[follower].applied] == want, within=10
        )
        store = cluster.nodes[follower].store
        assert store is not None
        assert [e.data for e in store.read(0) if e.data] == want
        nursery.cancel_scope.cancel()


async def test_leader_stop_elects_another_and_old_leader_rejoins(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        first = await cluster.wait_leader()
        first_epoch = cluster.driver(first).epoch
        await cluster.driver(first).propose([b"before"])
        await cluster.stop(first)
        second = await cluster.wait_leader(not_epoch=first_epoch)
        assert second != first
        await cluster.driver(second).propose([b"after"])
        await cluster.start(first)
        # It restarts resigned (KRaft: never lead an epoch again after a restart), then follows.
        await wait_until(
            lambda: (
                cluster.driver(first).role is Role.FOLLOWER
                and cluster.driver(first).leader_id == second
            ),
            within=10,
        )
        await wait_until(
            lambda: [e.data for e in cluster.nodes[first].applied] == [b"before", b"after"],
            within=10,
        )
        nursery.cancel_scope.cancel()


async def test_proposal_on_a_deposed_leader_fails_not_leader(tmp_path: Path) -> None:
    """A leader cut off from both followers resigns (check-quorum); its pending proposal
    fails with NOT_LEADER_OR_FOLLOWER instead of hanging."""
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        for other in VOTERS - {leader}:
            cluster.transport.down.add(other)
        # Followers cannot reach the leader either: cut it off both ways.
        cluster.transport.down.add(leader)
        with trio.fail_after(10), pytest.raises(NotLeaderError):
            await cluster.driver(leader).propose([b"lost"])
        nursery.cancel_scope.cancel()


async def test_wiped_follower_catches_up_through_fetch_snapshot(tmp_path: Path) -> None:
    """The leader snapshots its state and drops the log below it; a follower that lost its
    disk gets the snapshot over the wire (FetchSnapshot, through the codec), loads it, then
    fetches the tail."""
    import shutil

    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        driver = cluster.driver(leader)
        for n in range(4):
            await driver.propose([f"s{n}".encode()])
        await wait_until(lambda: driver.applied_offset == driver.high_watermark, within=5)
        state = b"|".join(e.data for e in cluster.nodes[leader].applied)
        snap = await driver.create_snapshot(driver.applied_offset, state)
        assert await driver.delete_before_snapshot() == snap.end_offset
        with pytest.raises(ValueError):
            await driver.create_snapshot(driver.high_watermark + 5, b"beyond the HW")

        follower = min(i for i in VOTERS if i != leader)
        await cluster.stop(follower)
        shutil.rmtree(cluster.nodes[follower].directory)
        await driver.propose([b"tail"])

        node = cluster.nodes[follower]
        await cluster.start(follower)
        await wait_until(lambda: [e.data for e in node.applied] == [b"tail"], within=15)
        assert node.snapshots == [(snap, state)]
        assert node.store is not None and node.store.latest_snapshot_id() == snap
        nursery.cancel_scope.cancel()


class CheckingTransport(MemoryTransport):
    """Checks the persist-before-send rule on what actually went over the wire: a Fetch at
    offset N is sent only once the fetcher flushed up to N; a vote request in epoch E only
    once the candidate's quorum-state file says epoch E, voted for itself; a granted vote comes
    back only once the voter's file records that vote."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster
        self.checked = {"fetch": 0, "vote": 0, "granted": 0}

    def _file_state(self, node_id: int) -> tuple[int, int]:
        node = self.cluster.nodes[node_id]
        assert node.store is not None
        state = FileQuorumStateStore(node.store.directory).read()
        assert state is not None
        return state.epoch, state.voted_for

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        msg = wire.request_from_wire(request)
        if isinstance(msg, wire.cm.FetchRequest):
            store = self.cluster.nodes[msg.sender].store
            assert store is not None and store.flushed_end_offset >= msg.fetch_offset
            self.checked["fetch"] += 1
        vote = isinstance(msg, wire.cm.VoteRequest) and not msg.pre_vote
        if vote:
            assert self._file_state(msg.sender) == (msg.epoch, msg.sender)
            self.checked["vote"] += 1
        answer = await super().send(to_node, request, timeout_s=timeout_s)
        granted = (
            vote
            and isinstance(answer, wv.VoteResponse)
            and bool(answer.topics)
            and answer.topics[0].partitions[0].vote_granted
        )
        if granted:
            assert self._file_state(to_node) == (msg.epoch, msg.sender)  # type: ignore[union-attr]
            self.checked["granted"] += 1
        return answer


async def test_nothing_is_sent_before_it_is_durable(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        checking = CheckingTransport(cluster)
        cluster.transport = checking
        for i in sorted(VOTERS):
            await cluster.start(i)
        first = await cluster.wait_leader()
        first_epoch = cluster.driver(first).epoch
        for n in range(5):
            await cluster.driver(first).propose([f"d{n}".encode()])
        await cluster.stop(first)
        await cluster.wait_leader(not_epoch=first_epoch)
        await cluster.start(first)
        await wait_until(lambda: len(cluster.nodes[first].applied) == 5, within=10)
        # Two elections and replication happened, all of it checked.
        assert checking.checked["vote"] >= 2
        assert checking.checked["granted"] >= 2
        assert checking.checked["fetch"] > 5
        nursery.cancel_scope.cancel()


async def test_observer_follows_the_log_and_is_described(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery)
        for i in sorted(VOTERS):
            await cluster.start(i)
        leader = await cluster.wait_leader()
        await cluster.driver(leader).propose([b"o1"])
        await cluster.start(9)  # not a voter: an observer, as a broker will be
        await cluster.driver(leader).propose([b"o2"])
        await wait_until(lambda: [e.data for e in cluster.nodes[9].applied] == [b"o1", b"o2"])
        assert cluster.driver(9).role is Role.FOLLOWER
        assert cluster.driver(9).leader_id == leader

        def observers() -> list[tuple[int, int]]:
            part = cluster.driver(leader).describe_quorum().topics[0].partitions[0]
            return [(o.replica_id, o.log_end_offset) for o in part.observers]

        end = cluster.driver(leader).store.end_offset
        await wait_until(lambda: observers() == [(9, end)])
        # It never counts for the HW nor votes: with two voters down nothing commits.
        for other in VOTERS - {leader}:
            await cluster.stop(other)
        with pytest.raises(NotLeaderError):
            await cluster.driver(leader).propose([b"needs a voter majority"])
        nursery.cancel_scope.cancel()
