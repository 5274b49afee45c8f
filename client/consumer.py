"""The trio Consumer: group subscriptions or manual assignment, positions, seeks, commits and
pipelined fetches.

    async with Consumer(bootstrap_servers="localhost:9092", group_id="billing") as c:
        c.subscribe(["events"])            # or c.assign([TopicPartition("events", 0)])
        records = await c.poll(timeout_ms=1000)

One Fetch per leader is kept in flight while the caller works through the records already
fetched (Kafka's pipelining); records below the fetch offset in a first batch are skipped.
Without a valid position a partition is reset by auto.offset.reset (latest|earliest|none),
also when the broker answers OFFSET_OUT_OF_RANGE. With a group.id a partition first starts at
the group's committed offset (OffsetFetch); subscribe() joins the group (client.consumer_
coordinator: the assignors, commits, the rebalance listener; client.group_membership: JoinGroup,
SyncGroup, heartbeats, LeaveGroup).

KIP-320: a position remembers the leader epoch of the batch its last record came from; when
metadata names a new leader or leader epoch, the position is checked with OffsetForLeaderEpoch
before fetching again, and a log truncated under the consumer (an unclean election) is detected
(client.positions has the rules, as Kafka's SubscriptionState: back to the first offset known to
diverge, or LogTruncationError from poll() when auto.offset.reset is none).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import structlog
import trio

from client.cluster import ClusterClient, backoff_ms, now_ms
from client.config import consumer_config
from client.consumer_coordinator import ConsumerCoordinator, ConsumerRebalanceListener
from client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogTruncationError,
    NoOffsetForPartitionError,
)
from client.group_offsets import OffsetAndMetadata
from client.lifecycle import ClientBase
from client.positions import (
    NO_EPOCH,
    EpochEndOffset,
    FetchPosition,
    LogTruncation,
    PartitionState,
    Validation,
    leader_and_epoch,
    log_truncation_error,
)
from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.names import TopicPartition, validate_topic_name
from protocol.record_batch import (
    HEADER_SIZE,
    decode_batch_records,
    read_header,
)

log = structlog.get_logger("client.consumer")

_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}
_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


def decode_batch(
    topic: str, partition: int, data: bytes | memoryview, pos: int, check_crc: bool = True
) -> tuple[list[ConsumerRecord], int, int]:
    """Decode the batch at `pos` into ConsumerRecords; returns (records, batch end, next
    offset). `check_crc` is Kafka's check.crcs."""
    header, records = decode_batch_records(
        data, pos, factory=_record_factory(topic, partition), verify_crc=check_crc
    )
    return records, pos + header.size, header.next_offset


def _record_factory(
    topic: str, partition: int
) -> Callable[[int, int, bytes | None, bytes | None, tuple[Any, ...]], ConsumerRecord]:
    """Builds ConsumerRecords with tuple.__new__: half the cost of the NamedTuple constructor,
    which matters once per record on the consumer's hot path."""
    new = tuple.__new__

    def make(
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Any, ...],
    ) -> ConsumerRecord:
        return new(ConsumerRecord, (topic, partition, offset, timestamp, key, value, headers))

    return make


class _CompletedFetch:
    """Fetched bytes of one partition, decoded a batch at a time as poll() asks for records."""

    __slots__ = (
        "_batch_next",
        "_check_crc",
        "_data",
        "_idx",
        "_pos",
        "_records",
        "last_epoch",
        "next_offset",
        "tp",
    )

    def __init__(
        self, tp: TopicPartition, fetch_offset: int, data: bytes, check_crc: bool = True
    ) -> None:
        self.tp = tp
        self._check_crc = check_crc
        self.next_offset = fetch_offset
        self._data = data
        self._pos = 0
        self._records: list[ConsumerRecord] = []
        self._idx = 0
        self._batch_next = fetch_offset
        self.last_epoch = NO_EPOCH
        """Leader epoch of the batch `next_offset` was reached in (the position's epoch)."""

    def take(self, max_records: int, out: list[ConsumerRecord]) -> bool:
        """Append up to `max_records` records to `out`; True when this fetch is used up."""
        topic, partition = self.tp
        data = self._data
        taken = 0
        while taken < max_records:
            if self._idx >= len(self._records):
                if self._batch_next > self.next_offset:
                    self.next_offset = self._batch_next
                if self._pos + HEADER_SIZE > len(data):
                    return True
                header = read_header(data, self._pos)
                if self._pos + header.size > len(data):
                    # a partial batch at the end: the next fetch starts at it again
                    return True
                self.last_epoch = header.partition_leader_epoch  # per batch, not per record
                if header.next_offset > self.next_offset:
                    self._records, end, self._batch_next = decode_batch(
                        topic, partition, data, self._pos, self._check_crc
                    )
                else:
                    self._records, end, self._batch_next = (
                        [],
                        self._pos + header.size,
                        header.next_offset,
                    )
                self._pos = end
                # records below the fetch offset (the fetch started inside this batch)
                first = self.next_offset
                idx = 0
                records = self._records
                while idx < len(records) and records[idx].offset < first:
                    idx += 1
                self._idx = idx
                continue
            stop = min(len(self._records), self._idx + max_records - taken)
            chunk = self._records[self._idx : stop]
            out += chunk
            taken += len(chunk)
            self.next_offset = chunk[-1].offset + 1
            self._idx = stop
        if self._idx >= len(self._records) and self._pos >= len(data):
            if self._batch_next > self.next_offset:
                self.next_offset = self._batch_next
            return True
        return False


class Consumer(ClientBase):
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
        self._completed: deque[_CompletedFetch] = deque()
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

    def _drop_buffered(self, which: Any) -> None:
        self._completed = deque(cf for cf in self._completed if not which(cf.tp))
        self._buffered = {cf.tp for cf in self._completed}

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
        """ListOffsets for each partition at its leader, retrying retriable errors until
        `deadline`."""
        cluster = self._client()
        cluster.topics.update(tp.topic for tp in wanted)
        result: dict[TopicPartition, tuple[int, int]] = {}
        attempt = 0
        last_error = ""
        while True:
            todo = {tp: ts for tp, ts in wanted.items() if tp not in result}
            if not todo:
                return result
            by_node: dict[int, dict[TopicPartition, int]] = {}
            missing = False
            for tp, ts in todo.items():
                leader = cluster.metadata.leader_for(tp.topic, tp.partition)
                if leader is None:
                    missing = True
                    error = cluster.metadata.topic_errors.get(tp.topic)
                    if error:
                        last_error = error[1]
                        if error[0] is ErrorCode.INVALID_TOPIC_EXCEPTION:
                            raise KafkaError(*error)
                    elif (n := cluster.metadata.num_partitions(tp.topic)) is not None and not (
                        0 <= tp.partition < n
                    ):
                        last_error = f"partition {tp} does not exist (the topic has {n})"
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            if missing:
                cluster.request_update()
            for node, parts in by_node.items():
                try:
                    response: ListOffsetsResponse = await cluster.send(node, _list_request(parts))
                except KafkaConnectionError as exc:
                    cluster.drop(node)
                    cluster.request_update()
                    last_error = exc.message
                    continue
                if response.error_code:
                    raise KafkaError(
                        ErrorCode.from_wire(response.error_code),
                        response.error_message or "ListOffsets failed",
                    )
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.index)
                        if p.error_code == 0:
                            result[tp] = (p.offset, p.timestamp)
                            continue
                        code = ErrorCode.from_wire(p.error_code)
                        message = p.error_message or code.name
                        if not code.retriable:
                            raise KafkaError(code, f"ListOffsets for {tp}: {message}")
                        cluster.metadata.invalidate_leader(tp.topic, tp.partition)
                        cluster.request_update()
                        last_error = f"{tp}: {message}"
            if all(tp in result for tp in wanted):
                return result
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    "could not look up offsets before the deadline (default.api.timeout.ms)"
                    + (f": {last_error}" if last_error else "")
                )
            attempt += 1
            if cluster.needs_update():
                await cluster.maybe_refresh()
                if self._retry_now(wanted, result):
                    continue
            await trio.sleep(
                min(backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms),
                    remaining) / 1000
            )  # fmt: skip

    def _retry_now(
        self, wanted: dict[TopicPartition, int], result: dict[TopicPartition, tuple[int, int]]
    ) -> bool:
        """After a refresh: retry at once if every missing partition now has a leader."""
        assert self._cluster is not None
        leader_for = self._cluster.metadata.leader_for
        return all(
            leader_for(tp.topic, tp.partition) is not None for tp in wanted if tp not in result
        )

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

    def _drain(self, limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while self._completed and len(out) < limit:
            cf = self._completed[0]
            state = self._states.get(cf.tp)
            if state is None or state.position != cf.next_offset or state.awaiting_validation:
                # stale: sought or unassigned since it was fetched, or the leader changed and
                # the position must be validated first (Kafka drops these records too)
                self._completed.popleft()
                self._buffered.discard(cf.tp)
                continue
            try:
                used_up = cf.take(limit - len(out), out)
            except CorruptRecordBatchError as exc:
                self._completed.popleft()
                self._buffered.discard(cf.tp)
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"corrupt record batch in {cf.tp} after offset {state.position}: {exc}",
                ) from None
            if cf.next_offset != state.position:
                state.position = cf.next_offset
                state.offset_epoch = cf.last_epoch
            if used_up:
                self._completed.popleft()
                self._buffered.discard(cf.tp)
        return out

    def _send_fetches(self, cluster: ClusterClient) -> None:
        """Start a Fetch to every leader that has fetchable partitions and none in flight."""
        assert self._nursery is not None
        by_node: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        unknown = False
        leader_for = cluster.metadata.leader_for
        for tp, state in self._states.items():
            if state.position is None or state.awaiting_validation or tp in self._buffered:
                continue
            # _check_leaders made current_leader the metadata's leader unless that was stale
            leader = state.current_leader.leader
            if leader is None or leader != leader_for(tp.topic, tp.partition):
                unknown = True
                continue
            if leader not in self._fetching_nodes:
                by_node.setdefault(leader, {})[tp] = (state.position, state.current_leader.epoch)
        if unknown or cluster.needs_update():
            if unknown:
                cluster.request_update()
            self._nursery.start_soon(self._refresh_metadata, cluster)
        for node, parts in by_node.items():
            self._fetching_nodes.add(node)
            self._nursery.start_soon(self._fetch, node, parts, self._generation)

    def _check_leaders(self, cluster: ClusterClient) -> None:
        """Kafka's validatePositionsIfNeeded: a position whose leader or leader epoch changed
        in metadata awaits validation; send OffsetForLeaderEpoch to each new leader for the
        positions due (one request per leader in flight)."""
        assert self._nursery is not None
        now = now_ms()
        metadata = cluster.metadata
        by_node: dict[int, dict[TopicPartition, FetchPosition]] = {}
        for tp, state in self._states.items():
            if state.position is None:
                continue
            current = leader_and_epoch(metadata, tp)
            if not state.maybe_validate(current):
                if state.awaiting_validation and current.leader is None:
                    cluster.request_update()  # the poll refreshes metadata to find the leader
                continue
            node = state.current_leader.leader
            position = state.fetch_position()
            if node is None or position is None or node in self._validating_nodes:
                continue
            if state.next_validation_ms <= now:
                by_node.setdefault(node, {})[tp] = position
        for node, positions in by_node.items():
            for tp in positions:
                # Kafka's setNextAllowedRetry: not again while this request may be answered
                self._states[tp].next_validation_ms = now + self._request_timeout_ms
            self._validating_nodes.add(node)
            self._nursery.start_soon(self._validate, node, positions)

    async def _validate(self, node: int, positions: dict[TopicPartition, FetchPosition]) -> None:
        """OffsetForLeaderEpoch for `positions` at their new leader `node`, then the rules of
        client.positions (Kafka's OffsetFetcher.validatePositionsAsync)."""
        cluster = self._cluster
        assert cluster is not None
        topics: dict[str, list[OffsetForLeaderPartition]] = {}
        for tp, pos in positions.items():
            topics.setdefault(tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition,
                    leader_epoch=pos.offset_epoch,
                    current_leader_epoch=pos.current_leader.epoch,
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,  # a consumer (KIP-320), not a follower
            topics=tuple(
                OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()
            ),
        )
        retry: set[TopicPartition] = set()
        truncations: list[LogTruncation] = []
        try:
            try:
                response: OffsetForLeaderEpochResponse = await cluster.send(node, request)
            except KafkaError as exc:
                if self._closed:
                    return
                log.info("offset validation failed", node=node, error=str(exc))
                if isinstance(exc, KafkaConnectionError):
                    cluster.drop(node)
                retry.update(positions)
                response = OffsetForLeaderEpochResponse()
            if response.error_code:
                log.info("offset validation refused", node=node, error=response.error_message)
                retry.update(positions)
            answered: set[TopicPartition] = set()
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    requested = positions.get(tp)
                    state = self._states.get(tp)
                    if requested is None or state is None:
                        continue
                    answered.add(tp)
                    if p.error_code != ErrorCode.NONE:
                        # Kafka retries every error here (NOT_LEADER_OR_FOLLOWER,
                        # FENCED/UNKNOWN_LEADER_EPOCH, ...) after a metadata refresh.
                        log.info(
                            "offset validation error; retrying",
                            tp=str(tp),
                            error=ErrorCode.from_wire(p.error_code).name,
                        )
                        retry.add(tp)
                        continue
                    outcome, truncation = state.complete_validation(
                        tp, requested, EpochEndOffset(p.leader_epoch, p.end_offset), self._reset
                    )
                    self._after_validation(tp, state, requested, outcome, p.end_offset)
                    if truncation is not None:
                        truncations.append(truncation)
            retry.update(tp for tp in positions if tp not in answered)
            if truncations and self._truncation is None:
                self._truncation = log_truncation_error(truncations)
            if retry:
                cluster.request_update()
                self._wake_poll()  # the poll refreshes metadata meanwhile
                await trio.sleep(cluster.retry_backoff_ms / 1000)
                for tp in retry:
                    state = self._states.get(tp)
                    if state is not None and state.fetch_position() == positions[tp]:
                        state.next_validation_ms = 0.0  # due again
        finally:
            self._validating_nodes.discard(node)
            self._wake_poll()

    def _after_validation(
        self,
        tp: TopicPartition,
        state: PartitionState,
        requested: FetchPosition,
        outcome: Validation,
        end_offset: int,
    ) -> None:
        if outcome is Validation.DIVERGED:
            log.info(
                "Truncation detected; resetting offset to the first offset known to diverge",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                new_offset=state.position,
                new_epoch=state.offset_epoch,
            )
            self._after_seek(tp)
        elif outcome is Validation.RESET:
            log.info(
                "Truncation detected; resetting offset by auto.offset.reset",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                strategy=self._reset,
            )
            self._after_seek(tp)
        elif outcome is Validation.TRUNCATED:
            log.warning(
                "Truncation detected, but auto.offset.reset is none",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                end_offset=end_offset,
            )

    async def _refresh_metadata(self, cluster: ClusterClient) -> None:
        await cluster.maybe_refresh()
        self._wake_poll()

    def _wake_poll(self) -> None:
        fetched, self._fetched = self._fetched, trio.Event()
        fetched.set()

    async def _fetch(
        self, node: int, parts: dict[TopicPartition, tuple[int, int]], generation: int
    ) -> None:
        """One Fetch of `parts` ({tp: (fetch offset, current leader epoch)}) from `node`."""
        cluster = self._cluster
        assert cluster is not None
        c = self.config
        topics: dict[str, list[FetchPartition]] = {}
        for tp, (offset, leader_epoch) in parts.items():
            topics.setdefault(tp.topic, []).append(
                FetchPartition(
                    index=tp.partition,
                    fetch_offset=offset,
                    partition_max_bytes=c["max.partition.fetch.bytes"],
                    # FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the leader disagrees
                    current_leader_epoch=leader_epoch,
                )
            )
        request = FetchRequest(
            max_wait_ms=c["fetch.max.wait.ms"],
            min_bytes=c["fetch.min.bytes"],
            max_bytes=c["fetch.max.bytes"],
            topics=tuple(FetchTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
            isolation_level=1 if c["isolation.level"] == "read_committed" else 0,
        )
        try:
            try:
                response: FetchResponse = await cluster.send(
                    node, request, timeout_ms=c["request.timeout.ms"] + c["fetch.max.wait.ms"]
                )
            except KafkaError as exc:
                if self._closed:
                    return
                log.info("fetch failed", node=node, error=str(exc))
                cluster.drop(node)
                cluster.request_update()
                await trio.sleep(cluster.retry_backoff_ms / 1000)
                return
            if response.error_code:
                log.info("fetch refused", node=node, error=response.error_message)
                await trio.sleep(cluster.retry_backoff_ms / 1000)
                return
            if generation != self._generation:
                return
            self._handle_fetch(cluster, parts, response)
        finally:
            self._fetching_nodes.discard(node)
            self._wake_poll()

    def _handle_fetch(
        self,
        cluster: ClusterClient,
        parts: dict[TopicPartition, tuple[int, int]],
        response: FetchResponse,
    ) -> None:
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.index)
                state = self._states.get(tp)
                sent = parts.get(tp)
                if (
                    state is None
                    or sent is None
                    or state.position != sent[0]
                    or state.awaiting_validation  # the leader changed meanwhile
                ):
                    continue
                code = ErrorCode.from_wire(p.error_code)
                if code is ErrorCode.NONE:
                    state.high_watermark = p.high_watermark
                    state.log_start_offset = p.log_start_offset
                    if p.records:
                        self._completed.append(
                            _CompletedFetch(tp, state.position, p.records, self._check_crcs)
                        )
                        self._buffered.add(tp)
                elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
                    if self._reset == "none":
                        state.error = KafkaError(
                            code,
                            f"fetch offset {state.position} is out of range for partition {tp} "
                            "and auto.offset.reset is none",
                        )
                    else:
                        log.info(
                            "offset out of range; resetting",
                            tp=str(tp),
                            offset=state.position,
                            strategy=self._reset,
                        )
                        state.request_reset(self._reset)
                elif code in _LEADERSHIP_ERRORS or code.retriable:
                    cluster.metadata.invalidate_leader(tp.topic, tp.partition)
                    cluster.request_update()
                else:
                    state.error = KafkaError(code, f"fetching {tp}: {p.error_message or code.name}")


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


def _list_request(parts: dict[TopicPartition, int]) -> ListOffsetsRequest:
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp, ts in parts.items():
        topics.setdefault(tp.topic, []).append(
            ListOffsetsPartition(index=tp.partition, timestamp=ts)
        )
    return ListOffsetsRequest(
        topics=tuple(ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items())
    )
