"""Follower side of replication (Kafka's AbstractFetcherThread partition states): pure.

One `FollowerFetchState` per partition this broker follows. The fetcher (a trio driver, one
per source broker) asks it what to put in the Fetch (`position()`), tells it what came back,
and carries out the truncations it decides:

    state = FollowerFetchState.become_follower(topic_id=..., leader_epoch=..., log=log,
                                               high_watermark=hw)
    if state.truncate_to is not None: log.truncate_to(state.truncate_to); state.truncation_done(log)
    while fetching: position() -> request fields; then per partition one of
        on_records(log)                         after append_as_follower (LEO, latest epoch)
        on_diverging_epoch(diverging, log)      -> offset to truncate to (KIP-595)
        on_offset_out_of_range(...)             -> OutOfRangeDecision
        on_error(code, ...)                     -> FollowerErrorAction
    and follower_high_watermark(leader_hw, ...) for the local HW.

Truncation is by leader epoch, never to the local HW (KIP-101, KIP-279): on a diverging epoch
the follower truncates to min(leader's end offset for that epoch, its own end offset for it);
when it does not know the leader's epoch it truncates to the end of its largest epoch below it
and lets the leader check again. `truncate_to_hw_on_become_follower=True` brings back the
pre-KIP-101 behaviour (truncate to the local HW on becoming a follower, fetch without epochs)
for the tests that show it loses acknowledged records or lets replicas diverge. Do not use it
for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from broker.replica.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochLookup
from broker.replica.leader import DivergingEpoch
from protocol.errors import ErrorCode


class FollowerLog(EpochLookup, Protocol):
    """What the follower reads of its own log (storage.Log satisfies it)."""

    @property
    def log_end_offset(self) -> int: ...


class FetchStatus(Enum):
    TRUNCATING = "truncating"
    """A truncation is decided (`truncate_to`) and not yet done: do not fetch."""
    FETCHING = "fetching"
    FAILED = "failed"
    """Fenced (our leader epoch is older than the leader's): wait for a new LeaderAndIsr."""


class FollowerErrorAction(Enum):
    RETRY_AFTER_BACKOFF = "retry_after_backoff"
    """The partition is delayed by replica.fetch.backoff.ms, then fetched again."""
    HANDLE_OUT_OF_RANGE = "handle_out_of_range"
    """Ask the leader for its log start/end offsets (ListOffsets), then on_offset_out_of_range."""
    AWAIT_LEADER_AND_ISR = "await_leader_and_isr"
    """The partition is FAILED until become_follower is called with a newer epoch."""


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """The per-partition fields of a follower's Fetch request."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class OutOfRangeDecision:
    truncate_to: int | None = None
    """Truncate the log to this offset (the leader has less than we do: unclean election)."""
    truncate_fully_and_start_at: int | None = None
    """Empty the log and start it at this offset (the leader deleted what we would need)."""
    fetch_offset: int = 0


def follower_high_watermark(
    leader_high_watermark: int, log_end_offset: int, log_start: int = 0
) -> int:
    """min(leader's HW, own LEO), not below the log start: a follower never exposes more than
    it has, nor more than the leader committed."""
    return max(min(leader_high_watermark, log_end_offset), log_start, 0)


LEADER_BEHIND_ERRORS = frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER})
"""Answers of a broker that is not (yet) the leader in our epoch."""
LEADER_BEHIND_BACKOFF_MS = 50


@dataclass(slots=True)
class FollowerFetchState:
    topic_id: str
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int | None
    status: FetchStatus = FetchStatus.FETCHING
    truncate_to: int | None = None
    delayed_until_ms: int | None = None
    epoch_checks: bool = True
    """False only in the pre-KIP-101 mode: fetch without last_fetched_epoch."""
    leader_behind: int = 0
    """Consecutive answers saying the leader has not applied our epoch's change yet."""

    @classmethod
    def become_follower(
        cls,
        *,
        topic_id: str,
        leader_epoch: int,
        log: FollowerLog,
        high_watermark: int,
        current: FollowerFetchState | None = None,
        truncate_to_hw_on_become_follower: bool = False,
    ) -> FollowerFetchState:
        """The state when this broker starts following in `leader_epoch` (makeFollower +
        addPartitions). The same epoch as `current` keeps `current` (a repeated request).

        Post-KIP-101: fetch from the LEO with the log's latest epoch; the leader answers with a
        diverging epoch if the tail is not its. A log without epochs (empty) starts at its HW.
        """
        if (
            current is not None
            and current.current_leader_epoch == leader_epoch
            and current.status is not FetchStatus.FAILED
        ):
            return current
        leo = log.log_end_offset
        latest = log.latest_epoch()
        if truncate_to_hw_on_become_follower:
            hw = min(high_watermark, leo)
            return cls(
                topic_id,
                leader_epoch,
                fetch_offset=hw,
                last_fetched_epoch=None,
                status=FetchStatus.TRUNCATING if hw < leo else FetchStatus.FETCHING,
                truncate_to=hw if hw < leo else None,
                epoch_checks=False,
            )
        if latest is None or latest == UNDEFINED_EPOCH:
            hw = min(high_watermark, leo)
            return cls(
                topic_id,
                leader_epoch,
                fetch_offset=hw,
                last_fetched_epoch=None,
                status=FetchStatus.TRUNCATING if hw < leo else FetchStatus.FETCHING,
                truncate_to=hw if hw < leo else None,
            )
        return cls(topic_id, leader_epoch, fetch_offset=leo, last_fetched_epoch=latest)

    # -- what to fetch ---------------------------------------------------------------------

    def is_delayed(self, now_ms: int) -> bool:
        return self.delayed_until_ms is not None and now_ms < self.delayed_until_ms

    def is_ready_for_fetch(self, now_ms: int) -> bool:
        return self.status is FetchStatus.FETCHING and not self.is_delayed(now_ms)

    def position(self) -> FetchPosition:
        last = self.last_fetched_epoch if self.epoch_checks else None
        return FetchPosition(
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=UNDEFINED_EPOCH if last is None else last,
            current_leader_epoch=self.current_leader_epoch,
        )

    # -- what came back --------------------------------------------------------------------

    def on_records(self, log: FollowerLog) -> None:
        """Records were appended (append_as_follower): fetch on from the new LEO."""
        self.fetch_offset = log.log_end_offset
        self.delayed_until_ms = None
        if self.epoch_checks:
            self.last_fetched_epoch = log.latest_epoch()

    def on_diverging_epoch(self, diverging: DivergingEpoch, log: FollowerLog) -> int:
        """The leader says our log diverges (Kafka's getOffsetTruncationState); returns the
        offset to truncate to. The state is TRUNCATING until `truncation_done`."""
        leo = log.log_end_offset
        if diverging.end_offset == UNDEFINED_EPOCH_OFFSET:
            target = self.fetch_offset
        elif diverging.epoch == UNDEFINED_EPOCH:
            target = min(diverging.end_offset, leo)
        else:
            ours = log.end_offset_for_epoch(diverging.epoch)
            if ours is None:
                # We hold no epoch that old: everything from the leader's offset on is suspect.
                target = min(diverging.end_offset, leo)
            elif ours.epoch != diverging.epoch:
                # We never had the leader's epoch: cut back to the end of our largest epoch
                # below it; the next fetch carries that epoch and the leader checks again.
                target = min(ours.offset, leo)
            else:
                target = min(ours.offset, diverging.end_offset, leo)
        self.truncate_to = target
        self.status = FetchStatus.TRUNCATING
        return target

    def on_offset_out_of_range(
        self, *, leader_log_start_offset: int, leader_log_end_offset: int, log_end_offset: int
    ) -> OutOfRangeDecision:
        """Kafka's fetchOffsetAndTruncate, with the leader's offsets asked for by the driver."""
        if leader_log_end_offset < log_end_offset:
            decision = OutOfRangeDecision(
                truncate_to=leader_log_end_offset, fetch_offset=leader_log_end_offset
            )
            self.truncate_to = leader_log_end_offset
            self.status = FetchStatus.TRUNCATING
        elif leader_log_start_offset > log_end_offset:
            decision = OutOfRangeDecision(
                truncate_fully_and_start_at=leader_log_start_offset,
                fetch_offset=leader_log_start_offset,
            )
            self.truncate_to = leader_log_start_offset
            self.status = FetchStatus.TRUNCATING
        else:
            decision = OutOfRangeDecision(fetch_offset=log_end_offset)
            self.fetch_offset = log_end_offset
        return decision

    def truncation_done(self, log: FollowerLog) -> None:
        """The driver truncated as decided: fetch from the new LEO with its latest epoch."""
        self.fetch_offset = log.log_end_offset
        if self.epoch_checks:
            self.last_fetched_epoch = log.latest_epoch()
        self.truncate_to = None
        self.status = FetchStatus.FETCHING

    def on_error(
        self, code: int, *, request_leader_epoch: int, now_ms: int, backoff_ms: int
    ) -> FollowerErrorAction:
        """A partition error in a fetch response (Kafka's processFetchRequest)."""
        error = ErrorCode.from_wire(code)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            return FollowerErrorAction.HANDLE_OUT_OF_RANGE
        if error == ErrorCode.FENCED_LEADER_EPOCH and (
            request_leader_epoch == self.current_leader_epoch
        ):
            # The leader is in a newer epoch than we know: wait to be told about it.
            self.status = FetchStatus.FAILED
            return FollowerErrorAction.AWAIT_LEADER_AND_ISR
        if error in LEADER_BEHIND_ERRORS:
            # The leader has not applied the change that made us its follower yet: the
            # brokers apply a failover's changes in steps, each at its own pace, and half of
            # the followers are told before their leader. It will know in a moment, not in
            # replica.fetch.backoff.ms: retry after 50 ms, doubling up to that backoff.
            self.leader_behind += 1
            wait = min(backoff_ms, LEADER_BEHIND_BACKOFF_MS << min(self.leader_behind - 1, 10))
            self.delayed_until_ms = now_ms + wait
            return FollowerErrorAction.RETRY_AFTER_BACKOFF
        self.delayed_until_ms = now_ms + backoff_ms
        return FollowerErrorAction.RETRY_AFTER_BACKOFF

    def on_answer(self) -> None:
        """A fetch answer without an error for this partition."""
        self.leader_behind = 0
