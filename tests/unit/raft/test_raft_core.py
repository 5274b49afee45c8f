"""raft.core scenario tests, etcd-style: pure cores on a synchronous network with a
virtual clock (tests/unit/raft/raft_harness.py). No trio, no sleeps."""

from __future__ import annotations

import random

import pytest

from protocol.errors import ErrorCode
from raft.core import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Role,
    VoteRequest,
    VoteResponse,
)
from raft.core.quorum import next_high_watermark
from raft.log_store import Entry, MemoryLogStore

from .raft_harness import Net

T = 1000  # election timeout (Kafka's default)


def _core(
    node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), epochs: tuple[int, ...] = (), **cfg
) -> RaftCore:
    store = MemoryLogStore()
    store.append([Entry(i, e, b"x") for i, e in enumerate(epochs)])
    store.flush()
    qs = QuorumStateData(epoch=max(epochs, default=0))
    config = RaftConfig(node_id=node_id, voters=frozenset(voters), **cfg)
    return RaftCore(config, store, random.Random(7), qs, now_ms=0)


def _votes(core: RaftCore) -> list[VoteResponse]:
    rd = core.ready()
    core.advance(rd)
    return [m for _, m in rd.messages if isinstance(m, VoteResponse)]


# --- elections ------------------------------------------------------------------------------
def test_three_voters_elect_exactly_one_leader_and_replicate() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    epoch = net.nodes[leader].core.epoch
    assert all(n.core.epoch == epoch for n in net.nodes.values())
    assert all(n.core.leader_id == leader for n in net.nodes.values())
    off = net.propose(leader, b"a", b"b")
    net.run_until(lambda: all(n.core.high_watermark > off for n in net.nodes.values()))
    for node in net.nodes.values():
        assert [e.data for e in node.applied if e.data] == [b"a", b"b"]


def test_single_voter_leads_at_once() -> None:
    net = Net([1])
    assert net.leaders() == [1]
    off = net.propose(1, b"a")
    net.advance_to(net.now + 100)  # the linger
    assert net.nodes[1].core.high_watermark == off + 1


@pytest.mark.parametrize(
    ("cand_last_epoch", "cand_end", "granted"),
    [
        (2, 3, True),  # same log
        (2, 5, True),  # longer, same last epoch
        (3, 1, True),  # newer last epoch beats length
        (2, 2, False),  # shorter
        (1, 9, False),  # older last epoch
    ],
)
def test_vote_requires_an_up_to_date_log(
    cand_last_epoch: int, cand_end: int, granted: bool
) -> None:
    voter = _core(epochs=(1, 2, 2))  # last epoch 2, end offset 3
    voter.step(VoteRequest(sender=2, epoch=3, last_epoch=cand_last_epoch, end_offset=cand_end), 0)
    assert [v.granted for v in _votes(voter)] == [granted]


def test_unsafe_flag_grants_votes_to_stale_logs() -> None:
    voter = _core(epochs=(1, 2, 2), check_log_up_to_date=False)
    voter.step(VoteRequest(sender=2, epoch=3, last_epoch=1, end_offset=1), 0)
    assert [v.granted for v in _votes(voter)] == [True]


def test_one_vote_per_epoch() -> None:
    voter = _core()
    voter.step(VoteRequest(sender=2, epoch=1, last_epoch=0, end_offset=0), 0)
    voter.step(VoteRequest(sender=3, epoch=1, last_epoch=0, end_offset=0), 0)
    voter.step(VoteRequest(sender=2, epoch=1, last_epoch=0, end_offset=0), 0)  # duplicate
    assert [(v.sender, v.granted) for v in _votes(voter)] == [(1, True), (1, False), (1, True)]
    assert voter.voted_for == 2
    voter.step(VoteRequest(sender=3, epoch=2, last_epoch=0, end_offset=0), 0)  # new epoch
    assert [v.granted for v in _votes(voter)] == [True]
    assert (voter.epoch, voter.voted_for) == (2, 3)


def test_a_vote_survives_restart() -> None:
    voter = _core()
    voter.step(VoteRequest(sender=2, epoch=1, last_epoch=0, end_offset=0), 0)
    rd = voter.ready()
    assert rd.quorum_state == QuorumStateData(epoch=1, voted_for=2)
    restarted = RaftCore(voter.config, voter.store, random.Random(1), rd.quorum_state, 0)
    restarted.step(VoteRequest(sender=3, epoch=1, last_epoch=0, end_offset=0), 0)
    assert [v.granted for v in _votes(restarted)] == [False]


def test_election_timeouts_are_randomized_in_t_2t() -> None:
    deadlines = set()
    for seed in range(50):
        config = RaftConfig(node_id=1, voters=frozenset({1, 2, 3}), election_timeout_ms=T)
        core = RaftCore(config, MemoryLogStore(), random.Random(seed), QuorumStateData(), 0)
        deadline = core.ready().next_deadline_ms
        assert deadline is not None and T <= deadline < 2 * T
        deadlines.add(deadline)
    assert len(deadlines) > 10


def test_pre_vote_does_not_disturb_a_stable_leader() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    epoch = net.nodes[leader].core.epoch
    loner = next(i for i in (1, 2, 3) if i != leader)
    net.cut = {loner}
    net.advance_to(net.now + 10 * T)  # the loner times out and pre-votes, again and again
    assert net.nodes[loner].core.role is Role.PROSPECTIVE
    assert net.nodes[loner].core.epoch == epoch  # pre-vote never bumps the epoch
    net.cut = set()
    net.run_until(lambda: net.nodes[loner].core.role is Role.FOLLOWER)
    assert net.leaders() == [leader]
    assert all(n.core.epoch == epoch for n in net.nodes.values())


def test_without_pre_vote_a_rejoining_node_bumps_the_epoch() -> None:
    # The contrast that makes the test above meaningful.
    net = Net([1, 2, 3], pre_vote=False)
    leader = net.leader()
    epoch = net.nodes[leader].core.epoch
    loner = next(i for i in (1, 2, 3) if i != leader)
    net.cut = {loner}
    net.advance_to(net.now + 10 * T)
    assert net.nodes[loner].core.epoch > epoch
    net.cut = set()
    net.leader()
    assert max(n.core.epoch for n in net.nodes.values()) > epoch


# --- replication ----------------------------------------------------------------------------
def test_follower_truncates_a_diverging_tail() -> None:
    net = Net([1, 2, 3])
    for node_id, epochs in ((1, (1, 1, 3)), (2, (1, 2, 2, 2)), (3, (1, 1, 3))):
        store = MemoryLogStore()
        store.append([Entry(i, e, b"%d@%d" % (i, e)) for i, e in enumerate(epochs)])
        store.flush()
        net.nodes[node_id].persisted = QuorumStateData(epoch=3)
        net.start(node_id, store)
    leader = net.leader()
    assert leader in (1, 3)  # 2's last epoch (2) is behind: it cannot win
    net.run_until(lambda: net.nodes[2].store.end_offset == net.nodes[leader].store.end_offset)
    lead_log = net.nodes[leader].store.read(0)
    assert net.nodes[2].store.read(0) == lead_log
    assert [e.epoch for e in lead_log[:3]] == [1, 1, 3]


def test_commit_needs_a_majority() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    a, b = (i for i in (1, 2, 3) if i != leader)
    net.run_until(lambda: net.nodes[leader].core.high_watermark > 0)
    hw = net.nodes[leader].core.high_watermark
    net.cut = {a, b}
    off = net.propose(leader, b"x")
    net.advance_to(net.now + T)  # less than the check-quorum window
    assert net.nodes[leader].core.role is Role.LEADER
    assert net.nodes[leader].core.high_watermark == hw  # only the leader has it
    net.cut = {b}
    net.run_until(lambda: net.nodes[leader].core.high_watermark > off)


@pytest.mark.parametrize(
    ("ends", "epoch_start", "hw", "expected"),
    [
        ({1: 5, 2: 5, 3: 0}, 2, 0, 5),  # majority at 5, above the epoch start
        ({1: 5, 2: 2, 3: 0}, 2, 0, 0),  # majority only at the epoch start: old-epoch entries
        ({1: 5, 2: 3, 3: 3}, 2, 0, 3),  # do not commit until the epoch-start entry does
        ({1: 5, 2: 3, 3: 3}, 2, 4, 4),  # never back
        ({1: 9, 2: 9, 3: 9, 4: 1, 5: 1}, 0, 0, 9),
        ({1: 9, 2: 9, 3: 1, 4: 1, 5: 1}, 0, 0, 1),
    ],
)
def test_high_watermark_rule(
    ends: dict[int, int], epoch_start: int, hw: int, expected: int
) -> None:
    majority = len(ends) // 2 + 1
    assert next_high_watermark(ends, majority, epoch_start, hw) == expected


def test_leader_resigns_when_a_majority_stops_fetching() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    net.cut = set(net.voters) - {leader}
    cut_at = net.now
    net.run_until(lambda: net.nodes[leader].core.role is not Role.LEADER)
    assert net.nodes[leader].core.role is Role.RESIGNED
    assert net.now - cut_at >= 2000  # not before the fetch timeout
    assert net.nodes[leader].core.propose([b"x"], net.now).error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_end_quorum_epoch_hands_over_to_the_most_caught_up_voter() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    epoch = net.nodes[leader].core.epoch
    off = net.propose(leader, b"a")
    net.run_until(lambda: all(n.core.high_watermark > off for n in net.nodes.values()))
    net.nodes[leader].core.resign(net.now)
    net.pump(leader)
    resigned_at = net.now
    new = net.leader()
    assert new != leader and net.nodes[new].core.epoch == epoch + 1
    assert net.now - resigned_at < T  # the successor did not wait for an election timeout


def test_observer_replicates_but_never_votes_or_counts() -> None:
    net = Net([1, 2, 3], observers=(4,))
    leader = net.leader()
    off = net.propose(leader, b"a")
    net.run_until(lambda: net.nodes[4].core.high_watermark > off)
    assert [e.data for e in net.nodes[4].applied if e.data] == [b"a"]
    assert net.nodes[4].core.role is Role.FOLLOWER
    others = set(net.voters) - {leader}
    net.cut = others
    off2 = net.propose(leader, b"b")
    net.advance_to(net.now + T)
    assert net.nodes[4].store.end_offset > off2  # the observer has it...
    assert net.nodes[leader].core.high_watermark <= off2  # ...but does not commit it
    net.advance_to(net.now + 5 * T)
    assert net.nodes[4].core.role is not Role.CANDIDATE


def test_linger_batches_proposals_into_one_append() -> None:
    net = Net([1], append_linger_ms=25)
    store = net.nodes[1].store
    base = store.end_offset
    net.propose(1, b"a")
    net.advance_to(net.now + 10)
    net.propose(1, b"b")
    assert store.end_offset == base  # still lingering
    net.advance_to(net.now + 15)
    assert [e.data for e in store.read(base)] == [b"a", b"b"]


def test_propose_when_not_leader_and_bad_input() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    follower = next(i for i in (1, 2, 3) if i != leader)
    res = net.nodes[follower].core.propose([b"x"], net.now)
    assert res.error is ErrorCode.NOT_LEADER_OR_FOLLOWER and res.leader_id == leader
    core = net.nodes[leader].core
    with pytest.raises(ValueError, match="record 0 must be non-empty bytes"):
        core.propose([b""], net.now)
    with pytest.raises(TypeError, match="not one bytes"):
        core.propose(b"abc", net.now)
    with pytest.raises(ValueError, match="voters must name"):
        RaftConfig(node_id=1, voters=frozenset())


# --- persistence ordering -------------------------------------------------------------------
def test_granted_vote_is_in_a_ready_that_persists_it() -> None:
    voter = _core()
    voter.step(VoteRequest(sender=2, epoch=1, last_epoch=0, end_offset=0), 0)
    rd = voter.ready()
    assert rd.quorum_state == QuorumStateData(epoch=1, voted_for=2, leader_id=NO_LEADER)
    assert [m.granted for _, m in rd.messages if isinstance(m, VoteResponse)] == [True]
    # A second request before advance() lands in the next Ready, which cannot be taken
    # before this one was persisted.
    voter.step(VoteRequest(sender=2, epoch=1, last_epoch=0, end_offset=0), 0)
    with pytest.raises(RuntimeError, match="before advance"):
        voter.ready()
    voter.advance(rd)
    assert voter.ready().quorum_state is None


def test_candidate_persists_its_own_vote_with_its_requests() -> None:
    core = _core(pre_vote=False)
    core.advance(core.ready())
    core.tick(2 * T)
    rd = core.ready()
    assert rd.quorum_state == QuorumStateData(epoch=1, voted_for=1)
    assert {to for to, m in rd.messages if isinstance(m, VoteRequest)} == {2, 3}


def test_fetch_after_append_is_in_a_ready_that_flushes() -> None:
    net = Net([1, 2, 3])
    leader = net.leader()
    follower = next(i for i in (1, 2, 3) if i != leader)
    net.propose(leader, b"a")
    net.advance_to(net.now + 100)
    appended = [
        rd
        for rd in net.nodes[follower].readies
        if any(isinstance(m, FetchRequest) and m.fetch_offset > 1 for _, m in rd.messages)
    ]
    assert appended and all(rd.must_flush or rd.entries == () for rd in appended)
    assert any(rd.must_flush for rd in appended)


def test_a_fetch_answer_is_bounded_by_fetch_max_bytes() -> None:
    """KRaft bounds a Fetch answer by bytes (MAX_FETCH_SIZE_BYTES): 40 records of 100 bytes
    with fetch_max_bytes=250 travel two per answer (at least one always), and all commit."""
    net = Net([1, 2, 3], fetch_max_bytes=250)
    leader = net.leader()
    records = [bytes([i]) * 100 for i in range(1, 41)]
    off = net.propose(leader, *records)
    net.run_until(lambda: all(n.core.high_watermark > off for n in net.nodes.values()))
    for node in net.nodes.values():
        assert [e.data for e in node.applied if e.data] == records
    answers = [
        m
        for n in net.nodes.values()
        for rd in n.readies
        for _, m in rd.messages
        if isinstance(m, FetchResponse) and m.entries
    ]
    assert answers and max(sum(len(e.data) for e in m.entries) for m in answers) <= 250
    with pytest.raises(ValueError, match="fetch_max_bytes must be >= 1"):
        RaftConfig(node_id=1, voters=frozenset({1}), fetch_max_bytes=0)


def test_an_observer_whose_fetch_failed_asks_a_voter_after_the_backoff() -> None:
    # KafkaRaftClient's observer: a refused/broken Fetch to the leader -> retry.backoff.ms,
    # then leader discovery among the voters; without the report it waited request.timeout.ms.
    from raft.core.messages import FetchRequest, FetchResponse

    core = _core(node_id=4, retry_backoff_ms=20, request_timeout_ms=2000)

    def fetches(now: int) -> list[tuple[int, FetchRequest]]:
        core.tick(now)
        rd = core.ready()
        core.advance(rd)
        return [(to, m) for to, m in rd.messages if isinstance(m, FetchRequest)]

    (first,) = fetches(0)
    core.step(
        FetchResponse(sender=first[0], epoch=1, leader_id=2, fetch_offset=0, last_fetched_epoch=0),
        5,
    )
    assert core.role is Role.FOLLOWER and core.leader_id == 2
    ((to, fetch),) = fetches(5)
    assert to == 2
    core.on_request_failed(2, fetch, 10)
    assert core.leader_id == -1
    assert fetches(25) == []  # backing off
    assert len(fetches(30)) == 1  # asks a voter again, long before request.timeout.ms


def _answers(core: RaftCore) -> list[object]:
    rd = core.ready()
    core.advance(rd)
    return [m for _, m in rd.messages]


def _following_1(node_id: int = 2, voters: tuple[int, ...] = (1, 2, 3)) -> RaftCore:
    core = _core(node_id=node_id, voters=voters)
    core.advance(core.ready())
    core.step(BeginQuorumEpochRequest(1, 1, 1), 100)
    core.advance(core.ready())
    assert core.role is Role.FOLLOWER and core.leader_id == 1 and core.epoch == 1
    return core


def test_an_epoch_announced_for_a_non_voter_is_refused() -> None:
    """Kafka's validateVoterOnlyRequest. Before, a repeated BeginQuorumEpoch naming node 99
    made all three controllers follow a leader that does not exist."""
    core = _following_1()
    core.step(BeginQuorumEpochRequest(99, 5, 99), 200)
    (answer,) = _answers(core)
    assert isinstance(answer, BeginQuorumEpochResponse)
    assert answer.error == ErrorCode.INCONSISTENT_VOTER_SET
    assert (core.role, core.leader_id, core.epoch) == (Role.FOLLOWER, 1, 1)
    # A stale epoch from a real voter: FENCED_LEADER_EPOCH, nothing changes either.
    core.step(BeginQuorumEpochRequest(3, 0, 3), 210)
    (answer,) = _answers(core)
    assert answer.error == ErrorCode.FENCED_LEADER_EPOCH and core.leader_id == 1


def test_a_resignation_of_a_non_voter_is_refused() -> None:
    core = _following_1()
    core.step(EndQuorumEpochRequest(99, 1, 99, (2,)), 200)
    (answer,) = _answers(core)
    assert isinstance(answer, EndQuorumEpochResponse)
    assert answer.error == ErrorCode.INCONSISTENT_VOTER_SET
    core.tick(201)
    _answers(core)
    assert core.role is Role.FOLLOWER  # no election brought forward
    # The real leader's resignation naming 2 first: 2 runs for election at once.
    core.step(EndQuorumEpochRequest(1, 1, 1, (2,)), 300)
    assert [a.error for a in _answers(core)] == [ErrorCode.NONE]
    core.tick(301)
    assert core.role is Role.PROSPECTIVE


def test_an_observer_refuses_epoch_announcements() -> None:
    observer = _core(node_id=7)
    observer.advance(observer.ready())
    observer.step(BeginQuorumEpochRequest(1, 1, 1), 100)
    answers = [m for m in _answers(observer) if isinstance(m, BeginQuorumEpochResponse)]
    assert [a.error for a in answers] == [ErrorCode.INCONSISTENT_VOTER_SET]
