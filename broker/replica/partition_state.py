"""One partition's replication state on this broker (Kafka's Partition, minus the log): pure.

Holds the registration the controller decided (replicas, ISR, leader, leader epoch, partition
epoch), this broker's log end offset, and the high watermark; as leader also what it knows of
each follower (`broker.replica.leader.FollowerState`) and the ISR state machine of KIP-497.

Leader rules, as Kafka's:
- HW = min LEO over the maximal ISR (committed ISR + a member being added), and over followers
  outside the ISR that are caught up (they are about to join); only forward; and not at all
  while the committed ISR is smaller than min(min.insync.replicas, replication factor)
  (Kafka since 3.7).
- A follower is caught up when its LEO equals ours, or it was caught up within
  replica.lag.time.max.ms (`FollowerState.update_fetch` has the rule).
- Shrink: ISR members not caught up (`maybe_shrink_isr`). Expand: an assigned follower outside
  the ISR whose LEO >= HW and >= the start offset of our leader epoch (`maybe_expand_isr`,
  called by `update_follower_fetch`). Either returns an `AlterPartitionProposal` for the driver
  to send and leaves the ISR pending; nothing is proposed while one is in flight; the answer
  goes to `on_alter_partition_response`, which commits or rolls back. The ISR itself changes
  only by that answer or by `apply` (LeaderAndIsr / metadata).
- acks=all: `check_append(-1)` raises NOT_ENOUGH_REPLICAS before the append when the ISR is too
  small; `check_enough_replicas_reach_offset(offset)` says when a waiting produce is done and
  whether with NOT_ENOUGH_REPLICAS_AFTER_APPEND.
- Follower fetches: `validate_follower_fetch` (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
  NOT_LEADER_OR_FOLLOWER), then `diverging_epoch_for`, then the read, then
  `update_follower_fetch` (only when there was no diverging epoch).

Every method that needs the time takes `now_ms`; where it is optional it defaults to
`clock_ms()` (the process clock's monotonic milliseconds, protocol.clock; the owner injects
its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from broker.replica.epochs import EpochEndOffset, EpochLookup
from broker.replica.leader import (
    UNKNOWN_OFFSET,
    AlterPartitionProposal,
    CommittedIsr,
    DivergingEpoch,
    FollowerState,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
    SessionClock,
    _end_offset_for,
    check_current_leader_epoch,
    diverging_epoch,
)
from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

__all__ = [
    "UNKNOWN_OFFSET",
    "AlterPartitionAction",
    "AlterPartitionOutcome",
    "FollowerFetchUpdate",
    "PartitionChange",
    "PartitionState",
]

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A leader/ISR decision for one partition, from metadata (KRaft) or a LeaderAndIsr request."""

    tp: TopicPartition
    topic_id: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class FollowerFetchUpdate:
    high_watermark_changed: bool
    proposal: AlterPartitionProposal | None = None
    """An ISR expansion to send with AlterPartition (the ISR is now pending)."""


class AlterPartitionAction(Enum):
    COMMITTED = "committed"
    """The controller's ISR and partition epoch are ours now."""
    ROLLED_BACK = "rolled_back"
    """The controller said it did not apply it (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA):
    back to the last committed ISR; a new proposal may follow."""
    RETRY = "retry"
    """A transient error: send the same proposal again (the ISR stays pending)."""
    AWAIT_METADATA = "await_metadata"
    """Our state is stale (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION,
    or an answer for another leader/partition epoch): stay pending until LeaderAndIsr/metadata
    brings the truth through `apply`."""
    IGNORED = "ignored"
    """Not the proposal in flight (state changed since): nothing done."""


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    action: AlterPartitionAction
    high_watermark_changed: bool = False


_ROLLBACK_ERRORS = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
_STALE_STATE_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
    }
)


@dataclass(slots=True)
class PartitionState:
    tp: TopicPartition
    local_broker_id: int
    topic_id: str = ""
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    high_watermark: int = 0
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    clock_ms: Callable[[], int] = SYSTEM_CLOCK.monotonic_ms
    log_end_offset: int = UNKNOWN_OFFSET
    """This broker's log end offset, as last told."""
    leader_epoch_start_offset: int | None = None
    """Our LEO when our current leader epoch began; None unless leader."""
    followers: dict[int, FollowerState] = field(default_factory=dict)
    """Remote replicas of the assignment, while leader."""
    isr_state: IsrState = field(default_factory=lambda: CommittedIsr(()))
    ineligible_replicas: frozenset[int] = frozenset()
    """Brokers fenced or in controlled shutdown (from metadata): they may not join the ISR."""

    # -- registration --------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_broker_id

    @property
    def local_leo(self) -> int:
        return self.log_end_offset

    @property
    def isr(self) -> tuple[int, ...]:
        """The last committed ISR."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr_state.maximal_isr

    @property
    def is_isr_inflight(self) -> bool:
        return self.isr_state.is_inflight

    def is_newer(self, change: PartitionChange) -> bool:
        """Kafka skips a change whose leader epoch is older than the one it has; an equal epoch
        with a newer partition epoch (ISR change) is still applied."""
        if change.leader_epoch != self.leader_epoch:
            return change.leader_epoch > self.leader_epoch
        return change.partition_epoch > self.partition_epoch

    def apply(self, change: PartitionChange, local_leo: int, now_ms: int | None = None) -> bool:
        """Take the registration in `change` (makeLeader / makeFollower); `local_leo` is this
        broker's log end offset. Any ISR change in flight is dropped: the registration is the
        truth. Returns True when the HW moved forward (the ISR may now be down to one)."""
        now = self.clock_ms() if now_ms is None else now_ms
        was_leader = self.is_leader
        new_leader_epoch = change.leader_epoch > self.leader_epoch
        self.topic_id = change.topic_id
        self.leader = change.leader
        self.leader_epoch = change.leader_epoch
        self.partition_epoch = change.partition_epoch
        self.replicas = tuple(change.replicas)
        self.isr_state = CommittedIsr(tuple(change.isr))
        self.log_end_offset = local_leo
        if self.high_watermark > local_leo:
            self.high_watermark = max(local_leo, 0)
        if not self.is_leader:
            self.followers = {}
            self.leader_epoch_start_offset = None
            return False
        remote = [r for r in self.replicas if r != self.local_broker_id]
        self.followers = {r: self.followers.get(r) or FollowerState(r) for r in remote}
        if new_leader_epoch or not was_leader:
            for r, follower in self.followers.items():
                follower.reset(now, local_leo, new_leader=not was_leader, in_sync=r in self.isr)
            self.leader_epoch_start_offset = local_leo
        return self.maybe_advance_high_watermark(now)

    def restore_high_watermark(self, hw: int, local_leo: int) -> None:
        """At start-up from the HW checkpoint, never past the local log end."""
        self.high_watermark = max(0, min(hw, local_leo))

    # -- log end offsets and the high watermark ------------------------------------------

    def update_local_leo(self, leo: int, now_ms: int | None = None) -> bool:
        """After an append (or, as follower, a truncation); True when the HW moved forward."""
        self.log_end_offset = leo
        if self.high_watermark > leo:
            self.high_watermark = max(leo, 0)
        return self.maybe_advance_high_watermark(now_ms) if self.is_leader else False

    def update_follower_leo(self, broker_id: int, leo: int) -> bool:
        """The follower's LEO only, no timing and no ISR decision (drivers use
        `update_follower_fetch`); True when the HW moved."""
        follower = self.followers.setdefault(broker_id, FollowerState(broker_id))
        follower.log_end_offset = leo
        return self.maybe_advance_high_watermark()

    def update_high_watermark_from_leader(self, leader_hw: int, log_start_offset: int = 0) -> bool:
        """As follower, from a fetch response: min(leader's HW, own LEO), not below the log
        start (Kafka's updateHighWatermark; it may move back after a leader change)."""
        hw = max(min(leader_hw, self.log_end_offset), log_start_offset, 0)
        changed = hw != self.high_watermark
        self.high_watermark = hw
        return changed

    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, max(len(self.replicas), 1))

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr()

    @property
    def is_at_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) == self.effective_min_isr()

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    def maybe_advance_high_watermark(self, now_ms: int | None = None) -> bool:
        if not self.is_leader or self.is_under_min_isr:
            return False
        now = self.clock_ms() if now_ms is None else now_ms
        leo = self.log_end_offset
        maximal = self.maximal_isr
        new_hw = leo
        for broker_id, follower in self.followers.items():
            if follower.log_end_offset >= new_hw:
                continue
            if broker_id in maximal or (
                broker_id not in self.ineligible_replicas
                and follower.is_caught_up(leo, now, self.replica_lag_time_max_ms)
            ):
                new_hw = follower.log_end_offset
        if new_hw <= self.high_watermark:
            return False
        self.high_watermark = new_hw
        return True

    # -- follower fetches ----------------------------------------------------------------

    def validate_follower_fetch(self, replica_id: int, current_leader_epoch: int) -> None:
        """Raise KafkaError unless `replica_id` may fetch from us as leader in that epoch."""
        code = check_current_leader_epoch(self.leader_epoch, current_leader_epoch)
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            raise KafkaError(
                code,
                f"fetch of {self.tp} in leader epoch {current_leader_epoch}, older than ours "
                f"({self.leader_epoch})",
            )
        if code == ErrorCode.UNKNOWN_LEADER_EPOCH:
            raise KafkaError(
                code,
                f"fetch of {self.tp} in leader epoch {current_leader_epoch}, newer than ours "
                f"({self.leader_epoch})",
            )
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader: {self.leader})",
            )
        if replica_id not in self.followers:
            # With an epoch the pair (replica, epoch) is just not known yet (a reassignment
            # in progress): UNKNOWN_LEADER_EPOCH makes the follower retry, as Kafka.
            code = (
                ErrorCode.UNKNOWN_LEADER_EPOCH
                if current_leader_epoch >= 0
                else ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            raise KafkaError(
                code,
                f"replica {replica_id} is not a replica of {self.tp} in leader epoch "
                f"{self.leader_epoch} (replicas: {list(self.replicas)})",
            )

    def diverging_epoch_for(
        self, last_fetched_epoch: int, fetch_offset: int, epochs: EpochLookup, log_start_offset: int
    ) -> DivergingEpoch | None:
        """`leader.diverging_epoch` against our log, counting our current epoch from its start
        even if the log has no batch of it yet."""
        start = None
        if self.leader_epoch_start_offset is not None:
            start = (self.leader_epoch, self.leader_epoch_start_offset)
        return diverging_epoch(
            last_fetched_epoch,
            fetch_offset,
            epochs,
            log_start_offset=log_start_offset,
            current_epoch_start=start,
        )

    def end_offset_for_epoch(self, leader_epoch: int, epochs: EpochLookup) -> EpochEndOffset | None:
        """The leader's OffsetForLeaderEpoch answer (Kafka's lastOffsetForLeaderEpoch), counting
        our current epoch from its start even if the log has no batch of it yet: Kafka writes
        it into the epoch cache on becoming leader, so an epoch between the log's latest and
        ours ends where ours starts (a consumer's KIP-320 check after an unclean election)."""
        start = None
        if self.leader_epoch_start_offset is not None:
            start = (self.leader_epoch, self.leader_epoch_start_offset)
        return _end_offset_for(epochs, leader_epoch, start)

    def update_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        now_ms: int,
        leader_leo: int,
        *,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> FollowerFetchUpdate:
        """A follower fetched from `fetch_offset` (its LEO); `leader_leo` is our LEO when the
        fetch was read. May propose an ISR expansion; may move the HW."""
        follower = self.followers.get(replica_id)
        if not self.is_leader or follower is None:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} does not lead {self.tp} with replica {replica_id}",
            )
        follower.update_fetch(fetch_offset, log_start_offset, now_ms, leader_leo)
        proposal = self.maybe_expand_isr(replica_id)
        return FollowerFetchUpdate(self.maybe_advance_high_watermark(now_ms), proposal)

    def record_idle_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, quiet: SessionClock | None = None
    ) -> bool:
        """The cheap case of `update_follower_fetch`: an ISR member fetching again from our LEO,
        where it already was, with everything committed (HW = LEO). Such a fetch can neither
        move the HW (Kafka checks the HW only when a follower's LEO moved) nor expand the ISR;
        it only proves the follower still caught up. Records that and returns True; False
        (nothing recorded) means the caller must take `update_follower_fetch`."""
        follower = self.followers.get(replica_id)
        if (
            follower is None
            or fetch_offset != self.high_watermark
            or fetch_offset != self.log_end_offset
            or follower.log_end_offset != fetch_offset
            or not self.is_leader
            or replica_id not in self.isr_state.isr
        ):
            return False
        follower.update_fetch(fetch_offset, follower.log_start_offset, now_ms, fetch_offset)
        # `quiet`: the follower's session stops reading this partition until it changes; its
        # fetches meanwhile count as fetches at our LEO (FollowerState.quiet).
        follower.quiet = quiet
        return True

    # -- ISR changes ---------------------------------------------------------------------

    def can_join_isr(self, replica_id: int) -> bool:
        follower = self.followers.get(replica_id)
        return (
            self.is_leader
            and follower is not None
            and replica_id not in self.isr
            and replica_id not in self.ineligible_replicas
            and self.leader_epoch_start_offset is not None
            and follower.log_end_offset >= self.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
        )

    def isr_expand_candidates(self) -> list[int]:
        return [r for r in self.followers if self.can_join_isr(r)]

    def maybe_expand_isr(self, replica_id: int) -> AlterPartitionProposal | None:
        state = self.isr_state
        if not isinstance(state, CommittedIsr) or not self.can_join_isr(replica_id):
            return None
        proposal = self._proposal((*state.isr, replica_id))
        self.isr_state = PendingExpandIsr(replica_id, proposal, state)
        return proposal

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        """ISR members (not us) not caught up within replica.lag.time.max.ms; none while an
        ISR change is in flight."""
        if not self.is_leader or self.isr_state.is_inflight:
            return frozenset()
        out = set()
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            follower = self.followers.get(r)
            if follower is None or not follower.is_caught_up(
                self.log_end_offset, now_ms, self.replica_lag_time_max_ms
            ):
                out.add(r)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionProposal | None:
        state = self.isr_state
        out = self.out_of_sync_replicas(now_ms)
        if not out or not isinstance(state, CommittedIsr):
            return None
        proposal = self._proposal(tuple(r for r in state.isr if r not in out))
        self.isr_state = PendingShrinkIsr(out, proposal, state)
        return proposal

    def _proposal(self, new_isr: tuple[int, ...]) -> AlterPartitionProposal:
        return AlterPartitionProposal(
            topic=self.tp.topic,
            partition=self.tp.partition,
            topic_id=self.topic_id,
            leader_id=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            new_isr=new_isr,
            partition_epoch=self.partition_epoch,
        )

    def on_alter_partition_response(
        self,
        proposal: AlterPartitionProposal,
        *,
        error_code: int,
        isr: tuple[int, ...] = (),
        leader_epoch: int = -1,
        partition_epoch: int = -1,
        now_ms: int | None = None,
    ) -> AlterPartitionOutcome:
        """The controller's answer for `proposal` (Kafka's handleAlterPartitionUpdate/Error)."""
        state = self.isr_state
        if isinstance(state, CommittedIsr) or state.proposal is not proposal:
            return AlterPartitionOutcome(AlterPartitionAction.IGNORED)
        code = ErrorCode.from_wire(error_code)
        if code in _ROLLBACK_ERRORS:
            self.isr_state = state.last_committed
            return AlterPartitionOutcome(AlterPartitionAction.ROLLED_BACK)
        if code in _STALE_STATE_ERRORS:
            return AlterPartitionOutcome(AlterPartitionAction.AWAIT_METADATA)
        if code != ErrorCode.NONE:
            return AlterPartitionOutcome(AlterPartitionAction.RETRY)
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return AlterPartitionOutcome(AlterPartitionAction.AWAIT_METADATA)
        # A newer partition epoch: the controller applied it; the same one: nothing needed
        # applying. Committed either way, so the next change can be proposed.
        self.isr_state = CommittedIsr(tuple(isr))
        self.partition_epoch = partition_epoch
        return AlterPartitionOutcome(
            AlterPartitionAction.COMMITTED, self.maybe_advance_high_watermark(now_ms)
        )

    # -- produce with acks=all -----------------------------------------------------------

    def check_append(self, required_acks: int) -> None:
        """Before a leader append: KafkaError NOT_LEADER_OR_FOLLOWER, or NOT_ENOUGH_REPLICAS for
        acks=all (-1) while the ISR is below min(min.insync.replicas, RF)."""
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader: {self.leader})",
            )
        if required_acks == -1 and len(self.isr) < self.effective_min_isr():
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR of {self.tp} is {list(self.isr)}, fewer than the "
                f"{self.effective_min_isr()} in-sync replicas required (min.insync.replicas="
                f"{self.min_insync_replicas}, replication factor {len(self.replicas)})",
            )

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For an acks=all produce waiting for `required_offset` (its last offset + 1):
        (done, error). Done once the HW reaches it; NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
        ISR shrank below the minimum meanwhile; (True, NOT_LEADER_OR_FOLLOWER) if we lost the
        leadership (the caller must not wait any longer)."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.maximal_isr) < self.effective_min_isr():
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE
