"""Leader-side pieces of replication (Kafka's Replica, the ISR states of Partition, and the
follower-fetch checks of Partition.fetchRecords): pure, numbers in, decisions out.

- `FollowerState`: what the leader knows of one follower (LEO, log start offset, last fetch
  time, the leader's LEO at that fetch, last caught-up time). `update_fetch` applies Kafka's
  caught-up rule; `is_caught_up` is Kafka's ReplicaState.isCaughtUp.
- ISR states (Kafka's PartitionState hierarchy, KIP-497): `CommittedIsr`, `PendingExpandIsr`,
  `PendingShrinkIsr`. A pending state remembers the proposal sent to the controller; `isr` is
  the last committed ISR, `maximal_isr` is what the HW must respect until the answer comes.
- `AlterPartitionProposal`: the plain form of one AlterPartition partition entry.
- `check_current_leader_epoch` and `diverging_epoch`: the checks a leader makes on a follower
  fetch before reading (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-595's diverging epoch).

`broker.replica.partition_state.PartitionState` puts these together per partition.
Times are milliseconds from whatever clock the caller uses, consistently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from broker.replica.epochs import EpochEndOffset, EpochLookup, OffsetAndEpoch
from protocol.errors import ErrorCode, KafkaError

UNKNOWN_OFFSET = -1
NEVER_MS = -(1 << 62)
"""A time long before any clock's now (Kafka uses 0 with wall-clock time)."""


@dataclass(slots=True, eq=False)
class SessionClock:
    """When a follower's fetch session last fetched (its latest request's start, ms)."""

    ms: int = NEVER_MS


@dataclass(slots=True)
class FollowerState:
    """Kafka's ReplicaState for one remote replica, as the leader sees it."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = NEVER_MS
    last_caught_up_time_ms: int = NEVER_MS
    quiet: SessionClock | None = None
    """Set while the follower's session does not read this partition because nothing changed
    since the follower was at our LEO (broker.handlers.fetch): every fetch of that session is
    then one at our LEO, at `quiet.ms`, without touching this state. Folded into the times by
    `fold_quiet`, which the leader calls before the session's clock moves past a change."""

    def fold_quiet(self) -> None:
        """The session's fetches while this partition was quiet, as if each was recorded."""
        quiet = self.quiet
        if quiet is not None:
            self.quiet = None
            self.last_fetch_time_ms = max(self.last_fetch_time_ms, quiet.ms)
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, quiet.ms)

    def update_fetch(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_leo: int
    ) -> None:
        """A fetch from `fetch_offset` at `fetch_time_ms`; `leader_leo` is the leader's log end
        offset when the fetch was read (before any later append).

        Caught up at this fetch if it asks from the leader's LEO or beyond; caught up as of the
        previous fetch if it asks from at least the LEO the leader had then (it has everything
        the leader had at that time)."""
        self.fold_quiet()
        if fetch_offset >= leader_leo:
            caught_up = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        else:
            caught_up = self.last_caught_up_time_ms
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_leo, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = fetch_time_ms
        self.last_caught_up_time_ms = caught_up

    def reset(self, now_ms: int, leader_leo: int, *, new_leader: bool, in_sync: bool) -> None:
        """On a new leader epoch (Kafka's resetReplicaState). An ISR member counts as caught up
        now, anyone else as never, so that it does not hold the HW back."""
        self.quiet = None
        self.last_caught_up_time_ms = now_ms if in_sync else NEVER_MS
        if new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = NEVER_MS
        else:
            self.last_fetch_leader_log_end_offset = leader_leo
            # Not in the ISR: it must fetch again before it can come back.
            self.last_fetch_time_ms = now_ms if in_sync else NEVER_MS

    def is_caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        if leader_leo == self.log_end_offset:
            return True
        caught_up = self.last_caught_up_time_ms
        if self.quiet is not None:
            caught_up = max(caught_up, self.quiet.ms)
        return now_ms - caught_up <= max_lag_ms


# -- ISR states (KIP-497) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterPartitionProposal:
    """One partition of an AlterPartition request: the ISR the leader asks for."""

    topic: str
    partition: int
    topic_id: str
    leader_id: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    isr: tuple[int, ...]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True, eq=False)
class PendingExpandIsr:
    """An expansion sent, not answered. The new member already counts for the HW (it is
    caught up, and the HW may only be held back more, never advanced wrongly, by that)."""

    new_in_sync: int
    proposal: AlterPartitionProposal
    last_committed: CommittedIsr

    @property
    def isr(self) -> tuple[int, ...]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return (*self.last_committed.isr, self.new_in_sync)

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True, eq=False)
class PendingShrinkIsr:
    """A shrink sent, not answered. Until the controller agrees the removed members still count
    for the HW: advancing it without them, and the change then failing, would be a lie."""

    out_of_sync: frozenset[int]
    proposal: AlterPartitionProposal
    last_committed: CommittedIsr

    @property
    def isr(self) -> tuple[int, ...]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.last_committed.isr

    @property
    def is_inflight(self) -> bool:
        return True


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


# -- follower fetch checks -------------------------------------------------------------------


class DivergingEpoch(NamedTuple):
    """The leader's answer when a follower's log diverges: the end offset of the largest epoch
    <= the follower's last fetched epoch (FetchResponse's diverging_epoch field)."""

    epoch: int
    end_offset: int


def check_current_leader_epoch(local_leader_epoch: int, requested_epoch: int) -> ErrorCode:
    """Kafka's Partition.checkCurrentLeaderEpoch; a negative request epoch means "not sent"."""
    if requested_epoch < 0:
        return ErrorCode.NONE
    if requested_epoch < local_leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if requested_epoch > local_leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def diverging_epoch(
    last_fetched_epoch: int,
    fetch_offset: int,
    epochs: EpochLookup,
    *,
    log_start_offset: int = 0,
    current_epoch_start: tuple[int, int] | None = None,
) -> DivergingEpoch | None:
    """The check of Kafka's Partition.readRecords: None when the follower may read from
    `fetch_offset`, else where its log diverges from ours.

    Raises KafkaError OFFSET_OUT_OF_RANGE when our history cannot place the follower's epoch,
    or the offset is before our log start. `current_epoch_start` is (leader epoch, LEO when we
    became leader): Kafka writes it into the epoch cache on becoming leader, before any
    append; passing it gives the same answers when the log has not recorded it yet.
    A negative `last_fetched_epoch` (not sent) skips the check, as Kafka does.
    """
    if last_fetched_epoch < 0:
        return None
    found = _end_offset_for(epochs, last_fetched_epoch, current_epoch_start)
    if found is None:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"could not determine the end offset of the last fetched epoch {last_fetched_epoch}",
        )
    if fetch_offset < log_start_offset:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"fetch offset {fetch_offset} is before the log start offset {log_start_offset}",
        )
    if found.epoch < last_fetched_epoch or found.offset < fetch_offset:
        return DivergingEpoch(found.epoch, found.offset)
    return None


def _end_offset_for(
    epochs: EpochLookup, epoch: int, current_epoch_start: tuple[int, int] | None
) -> EpochEndOffset | None:
    if current_epoch_start is not None:
        leader_epoch, start = current_epoch_start
        latest = epochs.latest_epoch()
        if latest is None or latest < leader_epoch:
            # As if (leader_epoch, start) were the last entry; no append since, so LEO == start.
            if epoch == leader_epoch:
                return OffsetAndEpoch(start, leader_epoch)
            if epoch > leader_epoch:
                return None
            if latest is None:
                return OffsetAndEpoch(start, epoch)
            if epoch > latest:
                return OffsetAndEpoch(start, latest)
    return epochs.end_offset_for_epoch(epoch)
