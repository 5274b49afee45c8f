"""raft.core snapshots (FetchSnapshot), abandoned proposals and the choices checked against
KRaft's source (tests/unit/raft/raft_harness.py: pure cores, virtual clock, no sleeps)."""

from __future__ import annotations

import random

import pytest

from protocol.errors import ErrorCode
from raft.core import (
    AbandonedProposals,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Role,
    VoteRequest,
    VoteResponse,
)
from raft.log_store import MemoryLogStore, OffsetAndEpoch, SnapshotId

from .raft_harness import Net

T = 1000


def _committed_everywhere(net: Net, offset: int) -> None:
    net.run_until(lambda: all(n.core.high_watermark > offset for n in net.nodes.values()))


def _snapshot_and_trim(net: Net, node_id: int) -> SnapshotId:
    node = net.nodes[node_id]
    snap = node.core.create_snapshot(node.core.high_watermark, node.snapshot())
    assert node.core.delete_before_snapshot() == snap.end_offset
    assert node.store.start_offset == snap.end_offset
    return snap


def test_a_lagging_follower_catches_up_through_a_snapshot() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    lagging, other = (i for i in (1, 2, 3) if i != leader)
    net.cut = {lagging}
    off = net.propose(leader, b"a", b"b", b"c")
    net.run_until(lambda: net.nodes[leader].core.high_watermark > off)
    snap = _snapshot_and_trim(net, leader)
    off2 = net.propose(leader, b"d")  # a tail above the snapshot
    net.run_until(lambda: net.nodes[leader].core.high_watermark > off2)
    net.cut = set()
    end = net.nodes[leader].store.end_offset
    net.run_until(lambda: net.nodes[lagging].core.high_watermark >= end)
    follower = net.nodes[lagging]
    assert follower.loaded == [snap]
    assert follower.store.start_offset == snap.end_offset
    assert follower.store.read_snapshot(snap) == b"a,b,c"
    assert follower.data() == [b"a", b"b", b"c", b"d"]
    assert any(
        isinstance(m, FetchSnapshotRequest) for rd in follower.readies for _, m in rd.messages
    )
    assert net.nodes[other].loaded == []  # it never fell behind the log start


def test_a_restart_loads_the_snapshot_then_the_tail() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    off = net.propose(leader, b"a", b"b")
    _committed_everywhere(net, off)
    node_id = next(i for i in (1, 2, 3) if i != leader)
    node = net.nodes[node_id]
    snap = node.core.create_snapshot(node.core.high_watermark, node.snapshot())
    off2 = net.propose(leader, b"c")
    _committed_everywhere(net, off2)
    # Restart: the log below the snapshot is dropped at start-up; the first Ready loads the
    # snapshot, the committed tail follows once the HW is learnt again.
    restarted = net.start(node_id)
    assert restarted.readies[0].snapshot == snap
    assert restarted.store.start_offset == snap.end_offset
    assert restarted.data() == [b"a", b"b"]
    net.run_until(lambda: restarted.data() == [b"a", b"b", b"c"])
    assert restarted.loaded == [snap]


def test_chunked_transfer_retries_a_lost_chunk() -> None:
    # A request timeout below the fetch timeout: the lost chunk is asked again before the
    # follower would give up on its leader (with both at 2 s it starts an election instead).
    net = Net([1, 2, 3], fetch_snapshot_max_bytes=4, request_timeout_ms=500)
    leader = net.leader()
    lagging = next(i for i in (1, 2, 3) if i != leader)
    net.cut = {lagging}
    records = [b"rec%02d" % i for i in range(8)]
    off = net.propose(leader, *records)
    net.run_until(lambda: net.nodes[leader].core.high_watermark > off)
    snap = _snapshot_and_trim(net, leader)
    size = len(net.nodes[leader].store.read_snapshot(snap))
    assert size > 12  # several chunks
    lost: list[FetchSnapshotResponse] = []

    def drop(src: int, dst: int, msg: Message) -> bool:
        if isinstance(msg, FetchSnapshotResponse) and msg.position == 8 and not lost:
            lost.append(msg)
            return True
        return False

    net.drop = drop
    net.cut = set()
    net.run_until(lambda: net.nodes[lagging].data() == records)
    assert lost
    asked = [
        m.position
        for rd in net.nodes[lagging].readies
        for _, m in rd.messages
        if isinstance(m, FetchSnapshotRequest)
    ]
    assert asked.count(8) == 2  # resent after the request timeout
    assert asked == sorted(asked) and asked[0] == 0
    assert all(
        m.max_bytes == 4
        for rd in net.nodes[lagging].readies
        for _, m in rd.messages
        if isinstance(m, FetchSnapshotRequest)
    )


def test_a_leader_change_mid_transfer() -> None:
    net = Net([1, 2, 3], fetch_snapshot_max_bytes=4)
    leader = net.leader()
    lagging, other = (i for i in (1, 2, 3) if i != leader)
    net.cut = {lagging}
    records = [b"r%d" % i for i in range(10)]
    off = net.propose(leader, *records)
    net.run_until(lambda: all(net.nodes[i].core.high_watermark > off for i in (leader, other)))
    _snapshot_and_trim(net, leader)
    _snapshot_and_trim(net, other)
    switched: list[int] = []

    def drop(src: int, dst: int, msg: Message) -> bool:
        if isinstance(msg, FetchSnapshotResponse) and msg.position >= 8 and not switched:
            switched.append(msg.position)
            return True  # the old leader's chunk is lost as it resigns
        return False

    net.drop = drop
    net.cut = set()
    net.run_until(lambda: bool(switched))
    net.nodes[leader].core.resign(net.now)
    net.pump(leader)
    net.run_until(lambda: net.leaders() not in ([], [leader]))
    new = net.leaders()[0]
    assert new != leader
    off2 = net.propose(new, b"after")
    net.run_until(lambda: net.nodes[lagging].core.high_watermark > off2)
    assert net.nodes[lagging].data() == [*records, b"after"]
    assert len(net.nodes[lagging].loaded) == 1


def test_snapshot_not_found_starts_over_with_a_fetch() -> None:
    core = _follower(fetch_snapshot_max_bytes=4)
    snap = SnapshotId(5, 1)
    core.step(_fetch_answer(core, snapshot_id=snap), 10)
    rd = core.ready()
    core.advance(rd)
    (req,) = [m for _, m in rd.messages if isinstance(m, FetchSnapshotRequest)]
    assert (req.position, req.max_bytes) == (0, 4)
    core.step(
        FetchSnapshotResponse(1, 1, 1, req.snapshot_id, 0, error=_err("SNAPSHOT_NOT_FOUND")), 11
    )
    rd = core.ready()
    assert [type(m).__name__ for _, m in rd.messages] == ["FetchRequest"]


def test_a_late_fetch_answer_is_ignored_while_a_snapshot_is_fetched() -> None:
    """Pinned simulator seed 9508 as a unit test: a follower told to load a snapshot took a
    late (duplicated) Fetch answer for the same position and appended its entries, which the
    snapshot install then rolled back under an applied state machine."""
    from raft.log_store import Entry

    core = _follower(fetch_snapshot_max_bytes=4)
    snap = SnapshotId(5, 1)
    late = FetchResponse(
        1,
        core.epoch,
        1,
        fetch_offset=core.store.end_offset,
        last_fetched_epoch=core.store.last_epoch,
        entries=(Entry(0, 1, b"late"),),
        high_watermark=1,
    )
    core.step(_fetch_answer(core, snapshot_id=snap), 10)
    core.advance(core.ready())
    core.step(late, 11)  # same fetch offset and epoch as the answer that named the snapshot
    rd = core.ready()
    core.advance(rd)
    assert core.store.end_offset == 0
    assert core.high_watermark == 0
    assert rd.committed == ()


def test_create_snapshot_refuses_uncommitted_offsets() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    core = net.nodes[leader].core
    with pytest.raises(ValueError, match="at most the applied offset"):
        core.create_snapshot(core.high_watermark + 5, b"s")
    with pytest.raises(ValueError, match="above the log start 0"):
        core.create_snapshot(0, b"s")
    with pytest.raises(TypeError, match="must be bytes"):
        core.create_snapshot(1, "s")  # type: ignore[arg-type]
    # Nothing to delete below without a snapshot: the log start stays.
    assert core.delete_before_snapshot() == 0


# --- abandoned proposals --------------------------------------------------------------------
def test_queued_proposals_are_reported_abandoned_when_the_leader_resigns() -> None:
    net = Net([1, 2, 3], append_linger_ms=500)
    leader = net.leader()
    core = net.nodes[leader].core
    epoch = core.epoch
    first = core.propose([b"x"], net.now)
    second = core.propose([b"y", b"z"], net.now)
    core.resign(net.now)
    rd = net.pump(leader)
    assert rd.abandoned == (AbandonedProposals(epoch, first.last_offset, second.last_offset),)
    assert rd.role is Role.RESIGNED
    net.advance_to(net.now + 5 * T)
    assert all(e.data not in (b"x", b"y", b"z") for n in net.nodes.values() for e in n.applied)
    assert net.nodes[leader].abandoned == list(rd.abandoned)  # reported once


def test_check_quorum_abandons_queued_proposals_too() -> None:
    net = Net([1, 2, 3], append_linger_ms=10_000, max_batch_entries=1000)
    leader = net.leader()
    res = net.nodes[leader].core.propose([b"x"], net.now)
    net.pump(leader)
    net.cut = set(net.voters) - {leader}
    net.run_until(lambda: net.nodes[leader].core.role is Role.RESIGNED)
    assert [a.last_offset for a in net.nodes[leader].abandoned] == [res.last_offset]


# --- choices checked against KRaft -------------------------------------------------------------
def test_check_quorum_waits_one_and_a_half_fetch_timeouts() -> None:
    net = Net([1, 2, 3], fetch_timeout_ms=2000)
    leader = net.leader()
    net.cut = set(net.voters) - {leader}
    cut_at = net.now
    net.run_until(lambda: net.nodes[leader].core.role is not Role.LEADER)
    assert 3000 <= net.now - cut_at < 3000 + 100  # LeaderState's CHECK_QUORUM_TIMEOUT_FACTOR


def test_pre_vote_asks_in_the_current_epoch() -> None:
    core = _core(node_id=1)
    core.tick(10 * T)
    rd = core.ready()
    reqs = [m for _, m in rd.messages if isinstance(m, VoteRequest)]
    assert reqs and all(r.pre_vote and r.epoch == core.epoch == 0 for r in reqs)


@pytest.mark.parametrize(
    ("node_id", "backoff"),
    [(2, 0), (3, 125), (4, 250), (5, 500), (6, 1000)],  # 6 is not a preferred successor
)
def test_end_quorum_epoch_backoff_is_krafts_strict_exponential(node_id: int, backoff: int) -> None:
    voters = (1, 2, 3, 4, 5, 6)
    core = _core(node_id=node_id, voters=voters, election_backoff_max_ms=1000)
    core.step(BeginQuorumEpochRequest(1, 1, 1), 100)
    core.advance(core.ready())
    core.step(EndQuorumEpochRequest(1, 1, 1, (2, 3, 4, 5)), 200)
    core.advance(core.ready())
    if backoff:
        core.tick(199 + backoff)
        assert core.role is Role.FOLLOWER
    core.tick(200 + backoff)
    assert core.role is Role.PROSPECTIVE


def test_a_follower_grants_pre_votes_until_it_has_fetched_from_its_leader() -> None:
    core = _core(node_id=2)
    core.step(BeginQuorumEpochRequest(1, 1, 1), 100)
    core.advance(core.ready())
    core.tick(100)  # the first Fetch goes out
    core.advance(core.ready())
    assert core.role is Role.FOLLOWER
    core.step(VoteRequest(3, 1, 0, 0, pre_vote=True), 110)
    assert _granted(core) == [True]  # never fetched from the leader (KRaft's FollowerState)
    core.step(FetchResponse(1, 1, 1, fetch_offset=0, last_fetched_epoch=0), 120)
    core.advance(core.ready())
    core.step(VoteRequest(3, 1, 0, 0, pre_vote=True), 130)
    assert _granted(core) == [False]


# --- helpers ------------------------------------------------------------------------------------
def _core(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), **cfg: object) -> RaftCore:
    config = RaftConfig(node_id=node_id, voters=frozenset(voters), **cfg)  # type: ignore[arg-type]
    core = RaftCore(config, MemoryLogStore(), random.Random(3), QuorumStateData(), 0)
    core.advance(core.ready())
    return core


def _follower(**cfg: object) -> RaftCore:
    core = _core(node_id=2, **cfg)
    core.step(BeginQuorumEpochRequest(1, 1, 1), 1)
    core.advance(core.ready())
    core.tick(1)  # the first Fetch goes out
    core.advance(core.ready())
    return core


def _fetch_answer(core: RaftCore, snapshot_id: SnapshotId) -> FetchResponse:
    return FetchResponse(
        1,
        core.epoch,
        1,
        fetch_offset=core.store.end_offset,
        last_fetched_epoch=core.store.last_epoch,
        snapshot_id=OffsetAndEpoch(*snapshot_id),
    )


def _err(name: str) -> ErrorCode:
    return ErrorCode[name]


def _granted(core: RaftCore) -> list[bool]:
    rd = core.ready()
    core.advance(rd)
    return [m.granted for _, m in rd.messages if isinstance(m, VoteResponse)]
