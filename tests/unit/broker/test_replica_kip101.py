"""Both KIP-101 scenarios on the pure replication core: two replicas' logs as lists of
(epoch, value), driven through the leader's checks (PartitionState) and the follower's
decisions (FollowerFetchState) the way the fetcher drives them.

With `truncate_to_hw_on_become_follower=True` (pre-KIP-101) scenario 1 loses an acknowledged
record and scenario 2 leaves the replicas with different records at one offset; with the
default (truncation by leader epoch) neither happens."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from broker.replica.epochs import EpochHistory, OffsetAndEpoch
from broker.replica.follower import FetchStatus, FollowerFetchState, follower_high_watermark
from broker.replica.leader import DivergingEpoch
from broker.replica.partition_state import PartitionChange, PartitionState
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

TP = TopicPartition("t", 0)
A, B = 1, 2
NOW = 1_000_000


@dataclass
class Replica:
    """A replica's log as (epoch, value) per offset, its HW, and its partition state."""

    broker_id: int
    records: list[tuple[int, str]] = field(default_factory=list)
    hw: int = 0
    state: PartitionState | None = None
    fetch: FollowerFetchState | None = None

    # FollowerLog / EpochLookup
    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    def _history(self) -> EpochHistory:
        return EpochHistory.from_record_epochs([e for e, _ in self.records])

    def latest_epoch(self) -> int | None:
        return self._history().latest_epoch()

    def end_offset_for_epoch(self, leader_epoch: int) -> OffsetAndEpoch | None:
        return self._history().end_offset_for_epoch(leader_epoch)

    def truncate_to(self, offset: int) -> None:
        del self.records[offset:]
        self.hw = min(self.hw, offset)

    def values(self) -> list[str]:
        return [v for _, v in self.records]


def make_leader(r: Replica, epoch: int, isr: tuple[int, ...]) -> None:
    r.fetch = None
    r.state = PartitionState(TP, r.broker_id, clock_ms=lambda: NOW)
    r.state.restore_high_watermark(r.hw, r.log_end_offset)
    r.state.apply(PartitionChange(TP, "tid", r.broker_id, epoch, isr, (A, B)), r.log_end_offset)


def make_follower(r: Replica, leader: int, epoch: int, *, pre_kip101: bool) -> None:
    r.state = None
    r.fetch = FollowerFetchState.become_follower(
        topic_id="tid",
        leader_epoch=epoch,
        log=r,
        high_watermark=r.hw,
        truncate_to_hw_on_become_follower=pre_kip101,
    )
    if r.fetch.truncate_to is not None:
        r.truncate_to(r.fetch.truncate_to)
        r.fetch.truncation_done(r)


def produce(leader: Replica, value: str) -> int:
    """Append as leader; returns the offset the acks=all produce waits for."""
    assert leader.state is not None
    leader.state.check_append(-1)
    leader.records.append((leader.state.leader_epoch, value))
    leader.state.update_local_leo(leader.log_end_offset, NOW)
    leader.hw = leader.state.high_watermark
    return leader.log_end_offset


def fetch_once(follower: Replica, leader: Replica) -> bool:
    """One follower fetch round, as the fetcher does it; False when nothing came back."""
    fs, ls = follower.fetch, leader.state
    assert fs is not None and ls is not None
    if fs.truncate_to is not None:
        follower.truncate_to(fs.truncate_to)
        fs.truncation_done(follower)
    pos = fs.position()
    ls.validate_follower_fetch(follower.broker_id, pos.current_leader_epoch)
    try:
        diverging = ls.diverging_epoch_for(pos.last_fetched_epoch, pos.fetch_offset, leader, 0)
        if pos.fetch_offset > leader.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, "past the leader's LEO")
    except KafkaError as exc:
        assert exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
        fs.on_offset_out_of_range(
            leader_log_start_offset=0,
            leader_log_end_offset=leader.log_end_offset,
            log_end_offset=follower.log_end_offset,
        )
        return True
    if diverging is not None:
        assert isinstance(diverging, DivergingEpoch)
        fs.on_diverging_epoch(diverging, follower)
        return True
    leader_leo = leader.log_end_offset
    update = ls.update_follower_fetch(follower.broker_id, pos.fetch_offset, NOW, leader_leo)
    if update.proposal is not None:  # the rejoining replica: the controller agrees at once
        ls.on_alter_partition_response(
            update.proposal,
            error_code=0,
            isr=update.proposal.new_isr,
            leader_epoch=update.proposal.leader_epoch,
            partition_epoch=update.proposal.partition_epoch + 1,
            now_ms=NOW,
        )
    leader.hw = ls.high_watermark
    new = leader.records[pos.fetch_offset :]
    follower.records.extend(new)
    fs.on_records(follower)
    follower.hw = follower_high_watermark(ls.high_watermark, follower.log_end_offset)
    return bool(new)


def replicate(follower: Replica, leader: Replica) -> None:
    """Fetch until nothing new comes, plus one round to carry the final HW."""
    for _ in range(20):
        if not fetch_once(follower, leader):
            fetch_once(follower, leader)
            return
    raise AssertionError("replication did not settle")


def committed(replicas: list[Replica]) -> dict[int, set[tuple[int, str]]]:
    """offset -> the distinct records the replicas hold there."""
    out: dict[int, set[tuple[int, str]]] = {}
    for r in replicas:
        for offset, rec in enumerate(r.records):
            out.setdefault(offset, set()).add(rec)
    return out


def scenario_1(pre_kip101: bool) -> tuple[Replica, Replica, list[str]]:
    """KIP-101 scenario 1: high watermark truncation followed by immediate leader election.

    A leads epoch 0, B follows, min.insync.replicas=1. m1 and m2 are replicated and
    acknowledged (A's HW reaches 2), but B restarts before it learns HW 2 (its HW is 1).
    B becomes a follower again; before it fetches, A dies and B is elected (epoch 1, clean:
    B was in the ISR). A comes back as B's follower."""
    a, b = Replica(A), Replica(B)
    make_leader(a, 0, (A, B))
    make_follower(b, A, 0, pre_kip101=pre_kip101)
    acked = []
    for value in ("m1", "m2"):
        required = produce(a, value)
        replicate(b, a)
        done, error = a.state.check_enough_replicas_reach_offset(required)
        assert done and error == ErrorCode.NONE
        acked.append(value)
    # B's last fetch response (HW 2) is lost with B's restart.
    b.hw = 1
    make_follower(b, A, 0, pre_kip101=pre_kip101)  # B restarts, follows A again
    make_leader(b, 1, (B,))  # A dies; B elected before fetching anything
    make_follower(a, B, 1, pre_kip101=pre_kip101)  # A restarts as B's follower
    replicate(a, b)
    required = produce(b, "m3")
    replicate(a, b)
    assert b.state is not None
    if b.state.check_enough_replicas_reach_offset(required) == (True, ErrorCode.NONE):
        acked.append("m3")
    return a, b, acked


def scenario_2(pre_kip101: bool) -> tuple[Replica, Replica]:
    """KIP-101 scenario 2: replica divergence on restart after multiple hard failures.

    A leads epoch 0 with B in the ISR. m1 is replicated (HW 1). m2 is appended and fetched
    by B (A's HW 2), then a power failure hits both: B loses m2 (not flushed), its HW is 1;
    A keeps m2 and HW 2. B restarts first and is elected (epoch 1); it takes m3 at offset 1.
    A restarts as B's follower."""
    a, b = Replica(A), Replica(B)
    make_leader(a, 0, (A, B))
    make_follower(b, A, 0, pre_kip101=pre_kip101)
    produce(a, "m1")
    replicate(b, a)
    produce(a, "m2")
    replicate(b, a)
    assert a.hw == 2
    b.truncate_to(1)  # the unflushed tail is gone after the power failure
    b.hw = 1
    make_leader(b, 1, (B,))
    produce(b, "m3")
    make_follower(a, B, 1, pre_kip101=pre_kip101)
    replicate(a, b)
    produce(b, "m4")
    replicate(a, b)
    return a, b


def test_scenario_1_kip101_keeps_acknowledged_records() -> None:
    a, b, acked = scenario_1(pre_kip101=False)
    assert b.values() == a.values() == ["m1", "m2", "m3"]
    assert acked == ["m1", "m2", "m3"] and set(acked) <= set(b.values())
    assert a.fetch is not None and a.fetch.status is FetchStatus.FETCHING
    assert a.hw == b.hw == 3


def test_scenario_1_truncating_to_hw_loses_an_acknowledged_record() -> None:
    a, b, acked = scenario_1(pre_kip101=True)
    assert "m2" in acked
    assert "m2" not in b.values() and "m2" not in a.values()  # acknowledged, then lost
    assert b.values() == a.values() == ["m1", "m3"]


def test_scenario_2_kip101_replicas_agree() -> None:
    a, b = scenario_2(pre_kip101=False)
    assert all(len(records) == 1 for records in committed([a, b]).values())
    assert a.records == b.records == [(0, "m1"), (1, "m3"), (1, "m4")]


def test_scenario_2_truncating_to_hw_lets_replicas_diverge() -> None:
    a, b = scenario_2(pre_kip101=True)
    assert a.log_end_offset == b.log_end_offset == 3
    diverged = {offset for offset, records in committed([a, b]).items() if len(records) > 1}
    assert diverged == {1}  # A has m2 at offset 1, B has m3: for good
    assert a.values() == ["m1", "m2", "m4"] and b.values() == ["m1", "m3", "m4"]


@pytest.mark.parametrize("pre_kip101", [False, True])
def test_scenarios_end_in_fetching_state(pre_kip101: bool) -> None:
    a, _, _ = scenario_1(pre_kip101)
    c, _ = scenario_2(pre_kip101)
    for r in (a, c):
        assert r.fetch is not None and r.fetch.is_ready_for_fetch(NOW)
