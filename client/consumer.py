"""The trio Consumer: group subscriptions or manual assignment, positions, seeks, commits and
pipelined fetches.

    async with Consumer(bootstrap_servers="localhost:9092", group_id="billing") as c:
        c.subscribe(["events"])            # or c.assign([TopicPartition("events", 0)])
        records = await c.poll(timeout_ms=1000)

One Fetch per leader is kept in flight while the caller works through the records already
fetched (Kafka's pipelining: client.fetcher; the decoding: client.fetched_records). Without a
valid position a partition is reset by auto.offset.reset (latest|earliest|none: ListOffsets,
client.list_offsets), also when the broker answers OFFSET_OUT_OF_RANGE. With a group.id a partition first starts at
the group's committed offset (OffsetFetch); subscribe() joins the group (client.consumer_
coordinator: the assignors, commits, the rebalance listener; client.group_membership: JoinGroup,
SyncGroup, heartbeats, LeaveGroup).

KIP-320: a position remembers the leader epoch of the batch its last record came from; when
metadata names a new leader or leader epoch, the position is checked with OffsetForLeaderEpoch
before fetching again (client.offset_validation), and a log truncated under the consumer (an
unclean election) is detected (client.positions has the rules, as Kafka's SubscriptionState:
back to the first offset known to diverge, or LogTruncationError from poll() when
auto.offset.reset is none).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import structlog
import trio

from client.cluster import ClusterClient, now_ms
from client.config import consumer_config
from client.consumer_coordinator import ConsumerCoordinator, ConsumerRebalanceListener
from client.errors import ClientClosedError, LogTruncationError, NoOffsetForPartitionError
from client.fetched_records import CompletedFetch, ConsumerRecord
from client.fetcher import Fetcher
from client.group_offsets import OffsetAndMetadata
from client.lifecycle import ClientBase
from client.list_offsets import list_offsets
from client.offset_validation import OffsetValidation
from client.positions import NO_EPOCH, PartitionState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.names import TopicPartition, validate_topic_name

log = structlog.get_logger("client.consumer")

_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class Consumer(Fetcher, OffsetValidation, ClientBase):
    """A Kafka-style consumer: subscribe() with a group.id, or assign() partitions by hand.
    Use as `async with Consumer(...) as c:`."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        super().__init__(consumer_config(config, **overrides))
        c = self.config
        self._auto_create_topics = c["allow.auto.create.topics"]
        self._reset: str = c["auto.offset.reset"]
        self._max_poll_records: int = c["max.poll.records"]
        self._check_crcs: bool = c["check.crcs"]
        self._api_timeout_ms: float = c["default.api.timeout.ms"]
        self._request_timeout_ms: float = c["request.timeout.ms"]
        self._states: dict[TopicPartition, PartitionState] = {}
        self._completed: deque[CompletedFetch] = deque()
        self._buffered: set[TopicPartition] = set()
        self._fetching_nodes: set[int] = set()
        self._validating_nodes: set[int] = set()
        self._truncation: LogTruncationError | None = None
        """Found by a validation with auto.offset.reset=none; raised by the next poll()."""
        self._fetched = trio.Event()
        self._generation = 0
        """Bumped by assign() and seeks so that fetches begun before them are dropped."""
        self._group_id: str = c["group.id"]
        self._coordinator: ConsumerCoordinator | None = None
        self._subscription: tuple[str, ...] = ()
        self._listener: ConsumerRebalanceListener | None = None

    def _on_started(self, nursery: trio.Nursery) -> None:
        if not self._group_id:
            return
        coordinator = ConsumerCoordinator(
            self._client(), self.config, nursery, self, wake=self._wake_poll
        )
        self._coordinator = coordinator
        if self._subscription:
            coordinator.subscribe(self._subscription, self._listener)
        nursery.start_soon(coordinator.run_heartbeats)

    async def close(self) -> None:
        """Commit the positions (enable.auto.commit) and leave the group, then stop."""
        coordinator = self._coordinator
        try:
            if coordinator is not None and not self._closed and self._stack is not None:
                with trio.move_on_after(self._api_timeout_ms / 1000):
                    await coordinator.close_group(now_ms() + self._api_timeout_ms)
        finally:
            # Cancelled while leaving the group (the caller's scope): the client's nursery must
            # still be left, or trio's nursery stack is corrupted.
            await super().close()

    # -- groups -------------------------------------------------------------------------------

    def subscribe(
        self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None
    ) -> None:
        """Join the consumer group (group.id) for `topics`: the group's leader assigns their
        partitions among the members at the next poll(); `listener` hears of each change."""
        if not self._group_id:
            raise KafkaError(
                ErrorCode.INVALID_GROUP_ID,
                "subscribe() needs a group.id in the consumer's configs (or use assign())",
            )
        if self._states and not self._subscription:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "subscribe() and assign() cannot be mixed: unsubscribe() or assign([]) first",
            )
        topics = tuple(sorted(set(topics)))
        for topic in topics:
            validate_topic_name(topic)
        self._subscription, self._listener = topics, listener
        if self._cluster is not None:
            self._cluster.topics.update(topics)
            self._cluster.request_update()
        if self._coordinator is not None:
            self._coordinator.subscribe(topics, listener)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    async def unsubscribe(self) -> None:
        """Leave the group and drop the assignment (Kafka's unsubscribe)."""
        coordinator = self._coordinator
        if coordinator is not None:
            if coordinator.auto_commit and coordinator.generation_if_stable() is not None:
                await coordinator.commit_sync(
                    self.consumed_offsets(), now_ms() + self._api_timeout_ms
                )
            await coordinator.revoke(self.assignment())
            coordinator.subscription = ()
            await coordinator.maybe_leave_group("the consumer unsubscribed")
        self._subscription = ()
        self._set_assignment(())

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What commit() commits by default: each partition's position (the next record
        poll() returns) with the leader epoch of the record before it."""
        return {
            tp: OffsetAndMetadata(
                state.position, None if state.offset_epoch == NO_EPOCH else state.offset_epoch
            )
            for tp, state in self._states.items()
            if state.position is not None
        }

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        """The assignment a rebalance gave (called by the coordinator)."""
        self._set_assignment(partitions)

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Kafka's commitSync: commit `offsets` (default: the consumed positions of every
        assigned partition) and wait until the coordinator has them replicated, retrying
        until default.api.timeout.ms. Raises CommitFailedError when the group rebalanced
        without this member, RebalanceInProgressError while it rebalances."""
        coordinator = self._group_coordinator()
        wanted = self.consumed_offsets() if offsets is None else _offsets(offsets)
        await coordinator.commit_sync(wanted, now_ms() + self._api_timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any]
        | None = None,
    ) -> None:
        """Kafka's commitAsync: start the commit and return; `callback(offsets, error)` is
        called when it completed (error None) or failed."""
        coordinator = self._group_coordinator()
        wanted = self.consumed_offsets() if offsets is None else _offsets(offsets)
        assert self._nursery is not None

        async def commit() -> None:
            error: Exception | None = None
            try:
                await coordinator.commit_sync(wanted, now_ms() + self._request_timeout_ms)
            except KafkaError as exc:
                error = exc
                if callback is None:
                    log.warning("Asynchronous offset commit failed", error=str(exc))
            if callback is not None:
                callback(wanted, error)

        self._nursery.start_soon(commit)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets for `partitions` (None: nothing committed)."""
        coordinator = self._group_coordinator()
        return await coordinator.fetch_committed(
            [TopicPartition(*tp) for tp in partitions], now_ms() + self._api_timeout_ms
        )

    def _group_coordinator(self) -> ConsumerCoordinator:
        self._client()
        if self._coordinator is None:
            raise KafkaError(
                ErrorCode.INVALID_GROUP_ID, "commits need a group.id in the consumer's configs"
            )
        return self._coordinator

    def _client(self) -> ClusterClient:
        if self._closed or self._cluster is None:
            raise ClientClosedError("consumer")
        return self._cluster

    # -- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Replace the assignment. New partitions start at the group's committed offset (with
        a group.id) else at auto.offset.reset, unless sought."""
        if self._subscription:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "assign() and subscribe() cannot be mixed: unsubscribe() first",
            )
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._states = {tp: self._states.get(tp) or PartitionState() for tp in wanted}
        self._drop_buffered(lambda tp: tp not in wanted)
        self._generation += 1
        if self._cluster is not None:
            self._cluster.topics = {tp.topic for tp in wanted} | set(self._subscription)
            self._cluster.request_update()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def _state(self, tp: TopicPartition | tuple[str, int]) -> PartitionState:
        try:
            return self._states[TopicPartition(*tp)]
        except KeyError:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {TopicPartition(*tp)} is not assigned to this consumer",
            ) from None

    def seek(
        self, tp: TopicPartition | tuple[str, int], offset: int, *, leader_epoch: int | None = None
    ) -> None:
        """Fetch from `offset` next. As Kafka's seek, the position then has no leader epoch
        (nothing to check after a leader change) unless `leader_epoch` is given: the epoch of
        the record before `offset` (as a committed offset carries it), which is validated
        against the leader before fetching (KIP-320)."""
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset}")
        if leader_epoch is not None and leader_epoch < 0:
            raise ValueError(f"seek leader_epoch must be >= 0 (or None), got {leader_epoch}")
        state = self._state(tp)
        state.seek(offset, NO_EPOCH if leader_epoch is None else leader_epoch)
        self._after_seek(TopicPartition(*tp))

    def seek_to_beginning(self, *tps: TopicPartition | tuple[str, int]) -> None:
        """Start from the log start offset (all assigned partitions when none are named)."""
        self._seek_to("earliest", tps)

    def seek_to_end(self, *tps: TopicPartition | tuple[str, int]) -> None:
        """Start from the high watermark (all assigned partitions when none are named)."""
        self._seek_to("latest", tps)

    def _seek_to(self, strategy: str, tps: tuple[TopicPartition | tuple[str, int], ...]) -> None:
        for tp in tps or tuple(self._states):
            state = self._state(tp)
            state.request_reset(strategy)
            state.error = None
            self._after_seek(TopicPartition(*tp))

    def _after_seek(self, tp: TopicPartition) -> None:
        self._drop_buffered(lambda t: t == tp)
        self._generation += 1

    async def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record poll() returns (resolving a pending reset)."""
        state = self._state(tp)
        if state.position is None:
            await self._update_positions(now_ms() + self._api_timeout_ms)
        assert state.position is not None
        return state.position

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int:
        """The high watermark from the last fetch of `tp` (-1 before any)."""
        return self._state(tp).high_watermark

    async def partitions_for(self, topic: str) -> list[int]:
        cluster = self._client()
        count = await cluster.wait_for_topic(
            topic,
            now_ms() + self._api_timeout_ms,
            f"{self._api_timeout_ms:.0f} ms (default.api.timeout.ms)",
        )
        return list(range(count))

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """First offset whose timestamp is >= the given one (None when there is none)."""
        found = await self._list_offsets(dict(timestamps), now_ms() + self._api_timeout_ms)
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, ts)
            for tp, (offset, ts) in found.items()
        }

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(
            dict.fromkeys(tps, EARLIEST_TIMESTAMP), now_ms() + self._api_timeout_ms
        )
        return {tp: offset for tp, (offset, _ts) in found.items()}

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(
            dict.fromkeys(tps, LATEST_TIMESTAMP), now_ms() + self._api_timeout_ms
        )
        return {tp: offset for tp, (offset, _ts) in found.items()}

    async def _list_offsets(
        self, wanted: dict[TopicPartition, int], deadline: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        return await list_offsets(self._client(), wanted, deadline)

    async def _update_positions(self, deadline: float) -> None:
        """Resolve every partition without a position: the group's committed offset first
        (with a group.id), else its reset strategy."""
        if self._coordinator is not None:
            await self._refresh_committed(self._coordinator, deadline)
        wanted: dict[TopicPartition, int] = {}
        for tp, state in self._states.items():
            if state.position is not None:
                continue
            strategy = state.reset or self._reset
            if strategy == "none":
                raise NoOffsetForPartitionError(
                    f"no offset for partition {tp} and auto.offset.reset is none"
                )
            wanted[tp] = _RESET_TIMESTAMPS[strategy]
        if not wanted:
            return
        generation = self._generation
        found = await self._list_offsets(wanted, deadline)
        if generation != self._generation:
            return  # a seek or assign happened meanwhile; the next poll looks again
        for tp, (offset, _ts) in found.items():
            state = self._states.get(tp)
            if state is not None and state.position is None:
                state.reset_to(offset)

    async def _refresh_committed(self, coordinator: ConsumerCoordinator, deadline: float) -> None:
        """Kafka's refreshCommittedOffsetsIfNeeded: partitions that have no position and no
        reset asked for start at the committed offset, validated against its leader epoch."""
        wanted = [tp for tp, s in self._states.items() if s.position is None and s.reset is None]
        if not wanted:
            return
        generation = self._generation
        committed = await coordinator.fetch_committed(wanted, deadline)
        if generation != self._generation:
            return  # a seek, assign or rebalance happened meanwhile; the next poll looks again
        for tp, found in committed.items():
            state = self._states.get(tp)
            if found is None or state is None or state.position is not None or state.reset:
                continue
            log.info("Setting offset for partition to the committed offset", tp=str(tp),
                     offset=found.offset, leader_epoch=found.leader_epoch)  # fmt: skip
            epoch = NO_EPOCH if found.leader_epoch is None else found.leader_epoch
            state.seek(found.offset, epoch)
            self._after_seek(tp)

    # -- polling ------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: float = 0, *, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions, waiting up to `timeout_ms` for some.
        Returns an empty list when none arrived in time."""
        cluster = self._client()
        deadline = now_ms() + timeout_ms
        limit = max_records or self._max_poll_records
        coordinator = self._coordinator
        while True:
            if coordinator is not None:
                coordinator.last_poll_ms = now_ms()
                if self._subscription:
                    coordinator.check_metadata()
                    await coordinator.ensure_active_group(deadline)
                coordinator.maybe_auto_commit()
            self._raise_partition_errors()
            if any(s.position is None for s in self._states.values()):
                await self._update_positions(max(deadline, now_ms() + self._api_timeout_ms))
            self._check_leaders(cluster)
            records = self._drain(limit)
            self._send_fetches(cluster)
            if records:
                return records
            remaining = deadline - now_ms()
            if remaining <= 0:
                return []
            fetched = self._fetched
            with trio.move_on_after(remaining / 1000):
                await fetched.wait()

    def _raise_partition_errors(self) -> None:
        if self._truncation is not None:
            error, self._truncation = self._truncation, None
            raise error
        for state in self._states.values():
            if state.error is not None:
                error, state.error = state.error, None
                raise error

    def _wake_poll(self) -> None:
        fetched, self._fetched = self._fetched, trio.Event()
        fetched.set()


def _offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, value in offsets.items():
        om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
        if om.offset < 0:
            raise ValueError(f"commit offset for {tp} must be >= 0, got {om.offset}")
        out[TopicPartition(*tp)] = om
    return out
