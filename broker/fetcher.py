"""Replica fetchers (Kafka's ReplicaFetcherManager + ReplicaFetcherThread): the trio drivers of
`broker.replica.follower` and the fetcher side of KIP-227 sessions.

`ReplicaFetcherManager` keeps one `ReplicaFetcher` task per (source broker, fetcher id), the id
being a stable hash of the partition modulo `num.replica.fetchers`, as Kafka's
getFetcherId. A fetcher sends one Fetch for all its ready partitions (replica_id = this
broker, each partition's fetch offset, last fetched epoch and current leader epoch) over the
`Transport`, with a `FetchSessionHandler` so that a follower of thousands of partitions sends
only what changed. For each partition in the answer it carries out the decision of its
`FollowerFetchState`: append as follower, truncate on a diverging epoch (by leader epoch, never
to the local HW), handle OFFSET_OUT_OF_RANGE with a ListOffsets to the leader, back off on
errors, and stop (FAILED) when fenced until a newer LeaderAndIsr. The follower's HW is
min(leader's HW, own LEO).

A partition's state object is replaced by every LeaderAndIsr that changes it; a response is
applied only to the state object (and fetch offset) it was requested for, so a truncation or a
leader change while a fetch is in flight never mixes logs.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio

from broker.metrics import BrokerTopicMetrics
from broker.ports import Failpoints, Transport
from broker.replica.fetch_session import FetchSessionHandler, PartitionRequest
from broker.replica.follower import FetchStatus, FollowerErrorAction, FollowerFetchState
from broker.replica.leader import DivergingEpoch
from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.log_context import keep_process_context_only
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.names import TopicPartition

if TYPE_CHECKING:
    from broker.partitions import Partition, PartitionManager

log = structlog.get_logger("broker.fetcher")


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    node_id: int
    num_fetchers: int = 1
    fetch_max_bytes: int = 1048576
    """replica.fetch.max.bytes (per partition)."""
    response_max_bytes: int = 10485760
    """replica.fetch.response.max.bytes."""
    max_wait_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class SourceBroker:
    broker_id: int
    host: str
    port: int


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId, with a hash stable across processes."""
    return (31 * zlib.crc32(tp.topic.encode()) + tp.partition) % max(num_fetchers, 1)


def truncate_log(partition: Partition, offset: int) -> None:
    """Truncate a follower's log to `offset` and tell the partition state its new LEO."""
    the_log = partition.log
    if offset < the_log.log_start_offset:
        the_log.truncate_fully_and_start_at(offset)
    else:
        the_log.truncate_to(offset)
    partition.state.update_local_leo(the_log.log_end_offset)


FULL_SCAN_MS = 5_000
"""How often a fetcher looks at every partition it follows, not only the changed ones."""


class _RequestView(Mapping[TopicPartition, PartitionRequest]):
    """The kept requests as the session handler reads them (no copy per round)."""

    __slots__ = ("_kept",)

    def __init__(self, kept: Mapping[TopicPartition, _KeptRequest]) -> None:
        self._kept = kept

    def __getitem__(self, tp: TopicPartition) -> PartitionRequest:
        return self._kept[tp].request

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._kept)

    def __len__(self) -> int:
        return len(self._kept)


@dataclass(frozen=True, slots=True)
class _KeptRequest:
    state: FollowerFetchState
    fetch_offset: int
    last_fetched_epoch: int | None
    log_start_offset: int
    request: PartitionRequest


class ReplicaFetcher:
    """One source broker (and fetcher id): fetches all its partitions in one request."""

    def __init__(self, manager: ReplicaFetcherManager, source: SourceBroker, fid: int) -> None:
        self.manager = manager
        self.source = source
        self.fetcher_id = fid
        self.own_transport = manager.transport_factory is not None
        self.transport: Transport = (
            manager.transport_factory() if manager.transport_factory else manager.transport
        )
        self.states: dict[TopicPartition, FollowerFetchState] = {}
        """Changed only through `follow` and `forget`, which mark the partition for the next
        round."""
        self.session: FetchSessionHandler[TopicPartition] = FetchSessionHandler()
        self._requests: dict[TopicPartition, _KeptRequest] = {}
        """The ready partitions' requests, and the position each was built from."""
        self._dirty: set[TopicPartition] = set()
        """Partitions whose state may have changed since their request was built: followed or
        forgotten, answered, delayed."""
        self._delayed: set[TopicPartition] = set()
        """Partitions backing off (few): looked at every round until their delay passed."""
        self._next_full_scan_ms = 0
        self.cancel_scope = trio.CancelScope()
        self._changed = trio.Event()
        self.fetches = 0
        """Fetch requests answered (for tests and metrics)."""
        self.lags: dict[TopicPartition, int] = {}
        """FetcherLagMetrics' ConsumerLag: the leader's HW minus our LEO at its last answer."""

    def wake(self) -> None:
        self._changed.set()

    def follow(self, tp: TopicPartition, state: FollowerFetchState) -> None:
        self.states[tp] = state
        self._dirty.add(tp)

    def forget(self, tp: TopicPartition) -> None:
        if self.states.pop(tp, None) is not None:
            self._dirty.add(tp)
        self.lags.pop(tp, None)

    async def run(self) -> None:
        # Started by a leadership change (often while a LeaderAndIsr request is served): log
        # with the process context and our own, not the request's.
        keep_process_context_only()
        structlog.contextvars.bind_contextvars(source_broker=self.source.broker_id)
        try:
            with self.cancel_scope:
                async with trio.open_nursery() as nursery:
                    # A transport of our own that needs a task (deploy's PooledTransport.run)
                    # lives as long as this fetcher.
                    runner = getattr(self.transport, "run", None) if self.own_transport else None
                    if runner is not None:
                        await nursery.start(runner)
                    await self._loop()
        finally:
            close = getattr(self.transport, "aclose", None)
            if self.own_transport and close is not None:
                with trio.CancelScope(shield=True):
                    await close()

    async def _loop(self) -> None:
        while True:
            try:
                await self._fetch_once()
            except Exception:
                log.exception("replica fetcher failed; backing off", source=self.source)
                await trio.sleep(self.manager.config.backoff_ms / 1000)

    async def _idle(self, now_ms: int) -> None:
        delays = [
            st.delayed_until_ms - now_ms
            for tp in self._delayed
            if (st := self.states.get(tp)) is not None
            and st.status is FetchStatus.FETCHING
            and st.delayed_until_ms is not None
        ]
        wait_ms = min(delays) if delays else self.manager.config.backoff_ms
        self._changed = trio.Event()
        with trio.move_on_after(max(wait_ms, 1) / 1000):
            await self._changed.wait()

    async def _fetch_once(self) -> None:
        config = self.manager.config
        now = self.manager.clock.monotonic_ms()
        failpoints = self.manager.failpoints
        if (
            failpoints is not None
            and failpoints.eval("replica.fetcher.skip_source") == self.source.broker_id
        ):
            # Failpoint: as if this broker could not reach the source (tests that need a
            # follower to keep what it has, e.g. KIP-101's scenarios).
            await self._idle(now)
            return
        changed = self._refresh(now)
        if not self._requests:
            # Nothing to send: what this round saw is still owed to the session handler
            # (a partition forgotten now must be forgotten in the next request too).
            if changed is None:
                self._next_full_scan_ms = 0
            else:
                self._dirty |= changed
            await self._idle(now)
            return
        sent = self._requests
        data = self.session.build(_RequestView(sent), changed)
        request = FetchRequest(
            max_wait_ms=config.max_wait_ms,
            min_bytes=config.min_bytes,
            topics=_fetch_topics(data.to_send),
            max_bytes=config.response_max_bytes,
            replica_id=config.node_id,
            session_id=data.session_id,
            session_epoch=data.epoch,
            forgotten_topics_data=_forgotten(data.forgotten),
        )
        source = self.source
        try:
            response = await self.transport.send(
                source.host, source.port, request, timeout_s=config.socket_timeout_ms / 1000
            )
        except Exception as exc:  # the transport may fail in any way; back off and retry
            log.warning(
                "follower fetch failed", source=source.broker_id, error=str(exc) or repr(exc)
            )
            self.session.handle_response(int(ErrorCode.UNKNOWN_SERVER_ERROR), 0)
            await trio.sleep(config.backoff_ms / 1000)
            return
        if self.source is not source:
            return  # the leader moved while we waited: this answer is for an old address
        assert isinstance(response, FetchResponse)
        self.fetches += 1
        if not self.session.handle_response(response.error_code, response.session_id):
            if response.error_code not in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            ):
                log.warning(
                    "follower fetch refused",
                    source=source.broker_id,
                    error=ErrorCode.from_wire(response.error_code).name,
                    message=response.error_message,
                )
                await trio.sleep(config.backoff_ms / 1000)
            return
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.index)
                kept = sent.get(tp)
                if kept is None:
                    continue
                st, req = kept.state, kept.request
                if self.states.get(tp) is not st or st.fetch_offset != req.fetch_offset:
                    continue
                self._dirty.add(tp)  # its position or status may change now
                await self._process(tp, st, req, part)

    def _refresh(self, now: int) -> set[TopicPartition] | None:
        """Bring the ready partitions' requests up to date; the partitions looked at, or None
        when all were (the first round, then every FULL_SCAN_MS: the follower's log start
        offset, which the request carries for the leader's information, also moves by
        retention, which tells no one). Only partitions marked since the last round are
        looked at otherwise: a round costs what changed, not what is followed (at 25,000
        partitions walking every partition per round was a quarter of a broker's CPU)."""
        if now >= self._next_full_scan_ms:
            self._next_full_scan_ms = now + FULL_SCAN_MS
            look: Iterable[TopicPartition] = self.states.keys() | self._requests.keys()
            changed = None
        else:
            look = self._dirty | self._delayed
            changed = look
        self._dirty = set()
        for tp in look:
            self._refresh_one(tp, now)
        return changed

    def _refresh_one(self, tp: TopicPartition, now: int) -> None:
        st = self.states.get(tp)
        self._delayed.discard(tp)
        partition = self.manager.partitions.get(tp) if st is not None else None
        if st is None or partition is None or st.status is not FetchStatus.FETCHING:
            self._requests.pop(tp, None)
            return
        if st.delayed_until_ms is not None and now < st.delayed_until_ms:
            self._delayed.add(tp)
            self._requests.pop(tp, None)
            return
        # Each partition's request is kept and rebuilt only when its position moved: the
        # same object also lets the session handler and the leader skip it at a glance.
        log_start = partition.log.log_start_offset
        cached = self._requests.get(tp)
        if (
            cached is not None
            and cached.state is st
            and cached.fetch_offset == st.fetch_offset
            and cached.last_fetched_epoch == st.last_fetched_epoch
            and cached.log_start_offset == log_start
        ):
            return
        pos = st.position()
        req = PartitionRequest(
            fetch_offset=pos.fetch_offset,
            max_bytes=self.manager.config.fetch_max_bytes,
            current_leader_epoch=pos.current_leader_epoch,
            last_fetched_epoch=pos.last_fetched_epoch,
            log_start_offset=log_start,
        )
        self._requests[tp] = _KeptRequest(
            st, st.fetch_offset, st.last_fetched_epoch, log_start, req
        )

    async def _process(
        self,
        tp: TopicPartition,
        st: FollowerFetchState,
        req: PartitionRequest,
        part: FetchPartitionResponse,
    ) -> None:
        partition = self.manager.partitions.get(tp)
        if partition is None or partition.state.is_leader:
            return
        the_log = partition.log
        if part.error_code != 0:
            action = st.on_error(
                part.error_code,
                request_leader_epoch=req.current_leader_epoch,
                now_ms=self.manager.clock.monotonic_ms(),
                backoff_ms=self.manager.config.backoff_ms,
            )
            if action is FollowerErrorAction.HANDLE_OUT_OF_RANGE:
                await self._handle_out_of_range(tp, st, partition)
            elif action is FollowerErrorAction.AWAIT_LEADER_AND_ISR:
                log.warning(
                    "follower fenced; waiting for LeaderAndIsr",
                    topic_partition=str(tp),
                    message=part.error_message,
                )
            return
        st.on_answer()
        try:
            if part.diverging_epoch is not None:
                diverging = DivergingEpoch(
                    part.diverging_epoch.epoch, part.diverging_epoch.end_offset
                )
                target = st.on_diverging_epoch(diverging, the_log)
                log.info(
                    "truncating on diverging epoch",
                    topic_partition=str(tp),
                    diverging_epoch=diverging.epoch,
                    leader_end_offset=diverging.end_offset,
                    log_end_offset=the_log.log_end_offset,
                    truncate_to=target,
                )
                truncate_log(partition, target)
                st.truncation_done(the_log)
            elif part.records:
                the_log.append_as_follower(part.records)
                st.on_records(the_log)
                partition.state.update_local_leo(the_log.log_end_offset)
                if self.manager.topic_metrics is not None:
                    self.manager.topic_metrics.replication_bytes_in.inc(len(part.records))
        except (KafkaError, CorruptRecordBatchError, OSError, ValueError) as exc:
            log.warning(
                "follower append failed; backing off", topic_partition=str(tp), error=str(exc)
            )
            st.delayed_until_ms = self.manager.clock.monotonic_ms() + self.manager.config.backoff_ms
            return
        self.lags[tp] = max(0, part.high_watermark - the_log.log_end_offset)
        failpoints = self.manager.failpoints
        if failpoints is not None and failpoints.eval("replica.follower.freeze_hw") is not None:
            return  # failpoint: the follower's HW lags the leader's (KIP-101's scenario 1)
        if partition.state.update_high_watermark_from_leader(
            part.high_watermark, the_log.log_start_offset
        ):
            self.manager.on_high_watermark(tp)

    async def _handle_out_of_range(
        self, tp: TopicPartition, st: FollowerFetchState, partition: Partition
    ) -> None:
        config = self.manager.config
        try:
            earliest, latest = await self._leader_offsets(tp, st.current_leader_epoch)
        except Exception as exc:  # the transport may fail in any way; back off and retry
            log.warning("leader offsets unavailable", topic_partition=str(tp), error=str(exc))
            st.delayed_until_ms = self.manager.clock.monotonic_ms() + config.backoff_ms
            return
        if self.states.get(tp) is not st or self.manager.partitions.get(tp) is not partition:
            return
        the_log = partition.log
        decision = st.on_offset_out_of_range(
            leader_log_start_offset=earliest,
            leader_log_end_offset=latest,
            log_end_offset=the_log.log_end_offset,
        )
        if decision.truncate_fully_and_start_at is not None:
            log.warning(
                "follower behind the leader's log start; starting over",
                topic_partition=str(tp),
                start=decision.truncate_fully_and_start_at,
            )
            the_log.truncate_fully_and_start_at(decision.truncate_fully_and_start_at)
            partition.state.update_local_leo(the_log.log_end_offset)
            st.truncation_done(the_log)
        elif decision.truncate_to is not None:
            log.warning(
                "follower ahead of the leader; truncating",
                topic_partition=str(tp),
                truncate_to=decision.truncate_to,
            )
            truncate_log(partition, decision.truncate_to)
            st.truncation_done(the_log)

    async def _leader_offsets(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        config = self.manager.config
        out = []
        for timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            request = ListOffsetsRequest(
                topics=(
                    ListOffsetsTopic(
                        name=tp.topic,
                        partitions=(
                            ListOffsetsPartition(
                                index=tp.partition, timestamp=timestamp, current_leader_epoch=epoch
                            ),
                        ),
                    ),
                ),
                replica_id=config.node_id,
            )
            response = await self.transport.send(
                self.source.host,
                self.source.port,
                request,
                timeout_s=config.socket_timeout_ms / 1000,
            )
            assert isinstance(response, ListOffsetsResponse)
            part = response.topics[0].partitions[0]
            if part.error_code != 0:
                raise KafkaError(ErrorCode.from_wire(part.error_code), part.error_message or "")
            out.append(part.offset)
        return out[0], out[1]


def _fetch_topics(to_send: dict[TopicPartition, PartitionRequest]) -> tuple[FetchTopic, ...]:
    by_topic: dict[str, list[FetchPartition]] = {}
    for tp, req in to_send.items():
        by_topic.setdefault(tp.topic, []).append(
            FetchPartition(
                index=tp.partition,
                fetch_offset=req.fetch_offset,
                partition_max_bytes=req.max_bytes,
                current_leader_epoch=req.current_leader_epoch,
                last_fetched_epoch=req.last_fetched_epoch,
                log_start_offset=req.log_start_offset,
            )
        )
    return tuple(FetchTopic(name=n, partitions=tuple(p)) for n, p in by_topic.items())


def _forgotten(tps: Iterable[TopicPartition]) -> tuple[ForgottenTopic, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(ForgottenTopic(topic=t, partitions=tuple(p)) for t, p in by_topic.items())


class ReplicaFetcherManager:
    """All fetchers of this broker. `run` hosts their tasks; LeaderAndIsr and StopReplica call
    `add_partitions` / `remove_partitions` synchronously."""

    def __init__(
        self,
        config: FetcherConfig,
        partitions: PartitionManager,
        transport: Transport,
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
        transport_factory: Callable[[], Transport] | None = None,
        topic_metrics: BrokerTopicMetrics | None = None,
        failpoints: Failpoints | None = None,
    ) -> None:
        self.config = config
        self.failpoints = failpoints
        self.clock = partitions.clock
        self.topic_metrics = topic_metrics
        """ReplicationBytesInPerSec, per follower append."""
        self.partitions = partitions
        self.transport = transport
        self.transport_factory = transport_factory
        """When given, each fetcher gets its own transport, as Kafka gives each fetcher thread
        its own NetworkClient: a long poll then never holds up another fetcher's or the
        controller channel's requests on a shared, in-order connection. A transport with
        `async run(task_status=...)` (deploy.node.transport.PooledTransport) is run by the fetcher
        for its lifetime; one with `aclose()` is closed when the fetcher stops."""
        self.on_high_watermark = on_high_watermark
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for fetcher in self.fetchers.values():
                nursery.start_soon(fetcher.run)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def state_of(self, tp: TopicPartition) -> FollowerFetchState | None:
        for fetcher in self.fetchers.values():
            st = fetcher.states.get(tp)
            if st is not None:
                return st
        return None

    def source_of(self, tp: TopicPartition) -> int | None:
        for (broker_id, _), fetcher in self.fetchers.items():
            if tp in fetcher.states:
                return broker_id
        return None

    def add_partition(
        self, tp: TopicPartition, source: SourceBroker, state: FollowerFetchState
    ) -> None:
        """Follow `tp` from `source` with `state` (replacing any earlier state of it)."""
        key = (source.broker_id, fetcher_id(tp, self.config.num_fetchers))
        for other_key, fetcher in self.fetchers.items():
            if other_key != key:
                fetcher.forget(tp)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, source, key[1])
            self.fetchers[key] = fetcher
            if self._nursery is not None:
                self._nursery.start_soon(fetcher.run)
        elif fetcher.source != source:
            # The leader's broker came back on another address: fetch from there, in a new
            # session (Kafka closes the fetcher thread and starts another).
            fetcher.source = source
            fetcher.session = FetchSessionHandler()
        fetcher.follow(tp, state)
        fetcher.wake()
        self._shutdown_idle()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        wanted = set(tps)
        for fetcher in self.fetchers.values():
            # Per partition asked, not per partition followed: a leadership change removes
            # partitions one by one, and a set operation with the keys walked all of them.
            states = fetcher.states
            for tp in [tp for tp in wanted if tp in states]:
                fetcher.forget(tp)
            fetcher.wake()
        self._shutdown_idle()

    def _shutdown_idle(self) -> None:
        for key in [k for k, f in self.fetchers.items() if not f.states]:
            self.fetchers.pop(key).cancel_scope.cancel()

    def lags(self) -> list[tuple[str, TopicPartition, int]]:
        """(clientId, partition, ConsumerLag) of every followed partition that had a fetch
        answer; clientId is Kafka's name of the fetcher, `ReplicaFetcherThread-<id>-<leader>`."""
        return [
            (f"ReplicaFetcherThread-{fetcher.fetcher_id}-{fetcher.source.broker_id}", tp, lag)
            for fetcher in list(self.fetchers.values())
            for tp, lag in list(fetcher.lags.items())
            if tp in fetcher.states
        ]

    @property
    def partition_count(self) -> int:
        return sum(len(f.states) for f in self.fetchers.values())
